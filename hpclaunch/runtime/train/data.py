"""Data: text records -> tokens -> fixed-length blocks, prepared once (rank 0, cached in the store),
then served per rank by a DistributedSampler (reshuffled each epoch with set_epoch).

Sources: a builtin corpus (the `tiny` presets) or staged parquet files of a hub dataset, read by path.
The data position (epoch, batch in epoch) is part of every checkpoint, so a resumed run sees exactly
the batches an uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from hpclaunch.assets.store import split_files
from hpclaunch.errors import AssetError
from hpclaunch.runtime.train.assets import fingerprint, generated, hub_asset, job_store
from hpclaunch.runtime.train.corpus import builtin_corpus
from hpclaunch.state import timeline

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.recipe import DatasetSpec, TrainSpec
    from hpclaunch.runtime.train.distributed import Dist


def _parquet_files(root: Path, name: str | None, split: str) -> list[Path]:
    paths = [p.relative_to(root).as_posix() for p in root.rglob("*.parquet")]
    return [root / p for p in split_files(paths, name, split)]  # the rule preflight checks the store's files by


def _dataset_spec(spec: JobSpec) -> DatasetSpec:
    ds = spec.recipe.dataset
    assert ds is not None, f"recipe {spec.recipe.name} has no dataset section"
    return ds


def read_texts(spec: JobSpec, split: str) -> list[str]:
    ds = _dataset_spec(spec)
    if ds.source == "builtin":
        assert ds.corpus is not None  # DatasetSpec's validator: source builtin needs a corpus
        return builtin_corpus(ds.corpus)[split]
    import pyarrow.parquet as pq

    assert ds.repo is not None  # DatasetSpec's validator: source hub needs a repo
    root = hub_asset(spec, "dataset", ds.repo, ds.revision)
    files = _parquet_files(root, ds.name, split)
    if not files:
        raise AssetError(
            f"dataset {ds.repo!r} ({ds.name or 'default'}) has no parquet files for split {split!r} "
            f"under {root}",
            hint="stage the dataset again, or set dataset.train_split/eval_split",
        )
    texts: list[str] = []
    for f in files:
        texts += [t for t in pq.read_table(f, columns=[ds.text_column]).column(0).to_pylist() if t]
    return texts


def _blocks(tokenizer: PreTrainedTokenizerBase, texts: list[str], block: int) -> np.ndarray:
    """Tokenize every record, concatenate, cut into blocks (the remainder is dropped)."""
    ids: list[np.ndarray] = []
    for i in range(0, len(texts), 10_000):  # batched: the fast tokenizer encodes in parallel
        enc = tokenizer(texts[i : i + 10_000], add_special_tokens=True)["input_ids"]
        ids += [np.asarray(x, dtype=np.int32) for x in enc]
    flat = np.concatenate(ids) if ids else np.zeros(0, np.int32)
    n = len(flat) // block
    return flat[: n * block].reshape(n, block)


def prepare_blocks(
    spec: JobSpec, tokenizer: PreTrainedTokenizerBase, tokenizer_src: str, d: Dist
) -> dict[str, torch.Tensor]:
    """{"train": [N, seq_len] int64, "validation": [M, seq_len]} from the cache (built once by rank 0)."""
    from hpclaunch.config.base import dump

    ds, train = _dataset_spec(spec), spec.recipe.train
    splits = {"train": ds.train_split, "validation": ds.eval_split}
    key = fingerprint("blocks", dump(ds), tokenizer_src, len(tokenizer), train.seq_len, 1)

    def build(out: Path) -> None:
        for name, split in splits.items():
            if split is None:
                continue
            if ds.source == "builtin":
                split = name
            elif name == "validation" and not _parquet_files(hub_asset(spec, "dataset", ds.repo or "", ds.revision),
                                                             ds.name, split):
                # submit said so too (preflight's notes): a dataset downloaded by hand often has its train split only
                print(f"[data] dataset {ds.repo!r} has no {split!r} split in the store: no evaluation", flush=True)
                continue
            np.save(out / f"{name}.npy", _blocks(tokenizer, read_texts(spec, split), train.seq_len))

    path = generated(job_store(spec), "data", key, build, d)
    out = {}
    for name in splits:
        f = path / f"{name}.npy"
        if f.is_file():
            out[name] = torch.from_numpy(np.load(f).astype(np.int64))
    if len(out.get("train", ())) == 0:
        raise AssetError(
            f"the dataset gave no training block of {train.seq_len} tokens", hint="lower train.seq_len"
        )
    return out


@dataclass
class Batches:
    """Micro-batches of one rank: a DistributedSampler over the blocks, reshuffled each epoch.

    `position` = (epoch, next micro-batch in the epoch), saved in checkpoints and restored on resume.
    """

    blocks: torch.Tensor
    micro_batch_size: int
    rank: int
    world_size: int
    seed: int
    shuffle: bool = True
    epoch: int = 0
    index: int = 0
    pin: bool = False  # page-locked batches: their copy to the GPU (non_blocking) does not wait on the stream

    def __post_init__(self) -> None:
        from torch.utils.data.distributed import DistributedSampler

        self.sampler: DistributedSampler[int] = DistributedSampler(
            range(len(self.blocks)),  # type: ignore[arg-type]  # typed Dataset; the sampler only takes its len()
            num_replicas=self.world_size,
            rank=self.rank,
            shuffle=self.shuffle,
            seed=self.seed,
            drop_last=True,
        )
        self._order: list[int] | None = None
        if self.per_epoch == 0:
            raise AssetError(
                f"{len(self.blocks)} blocks are too few for {self.world_size} data-parallel ranks x micro-batch "
                f"{self.micro_batch_size}",
                hint="use a bigger dataset or a smaller batch",
            )

    @property
    def per_epoch(self) -> int:
        return len(self.blocks) // self.world_size // self.micro_batch_size

    @property
    def position(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def restore(self, position: dict[str, int]) -> None:
        self.epoch, self.index, self._order = position["epoch"], position["index"], None

    def next(self) -> torch.Tensor:
        if self.index >= self.per_epoch:
            self.epoch, self.index, self._order = self.epoch + 1, 0, None
        if self._order is None:
            self.sampler.set_epoch(self.epoch)
            self._order = list(self.sampler)
        i = self.index * self.micro_batch_size
        self.index += 1
        batch = self.blocks[self._order[i : i + self.micro_batch_size]]
        return batch.pin_memory() if self.pin else batch

    def __iter__(self) -> Iterator[torch.Tensor]:
        """One pass in order (for eval)."""
        order = list(self.sampler)
        for i in range(self.per_epoch):
            yield self.blocks[order[i * self.micro_batch_size : (i + 1) * self.micro_batch_size]]


def mask_tokens(
    input_ids: torch.Tensor, tokenizer: PreTrainedTokenizerBase, probability: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: choose `probability` of the non-special tokens; of those 80% -> [MASK],
    10% -> a random token, 10% unchanged. Labels are -100 everywhere else."""
    labels = input_ids.clone()
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    for tid in tokenizer.all_special_ids:
        special |= input_ids == tid
    prob = torch.full(input_ids.shape, probability)
    prob.masked_fill_(special, 0.0)
    chosen = torch.bernoulli(prob, generator=generator).bool()
    labels[~chosen] = -100
    inputs = input_ids.clone()
    to_mask = torch.bernoulli(torch.full(input_ids.shape, 0.8), generator=generator).bool() & chosen
    inputs[to_mask] = tokenizer.mask_token_id
    to_random = (
        torch.bernoulli(torch.full(input_ids.shape, 0.5), generator=generator).bool() & chosen & ~to_mask
    )
    inputs[to_random] = torch.randint(len(tokenizer), input_ids.shape, generator=generator)[to_random]
    return inputs, labels


def train_and_eval_batches(blocks: dict[str, torch.Tensor], t: TrainSpec, d: Dist) -> tuple[Batches, Batches | None]:
    """This rank's training batches and, when the data has a validation split, its eval batches
    (not shuffled, so every evaluation sees the same blocks): those of its replica (with tensor parallelism
    the ranks of one replica read the same blocks)."""
    pin = d.accelerator == "cuda"  # a pageable host-to-device copy synchronises the stream first
    train = Batches(blocks["train"], t.micro_batch_size, d.dp_rank, d.dp_size, t.seed, pin=pin)
    timeline.mark("data_ready")  # rank 0
    if "validation" not in blocks:
        return train, None
    return train, Batches(blocks["validation"], t.micro_batch_size, d.dp_rank, d.dp_size, t.seed, shuffle=False)
