"""Tokenizer and model for a job: staged hub assets, or generated ones for the `tiny` presets.

Generated assets are deterministic (fixed seed, fixed corpus) and cached in the store, so every
launcher (torchrun/DDP, DeepSpeed ZeRO-1/2/3) starts from the very same weights.

Under ZeRO-3 the model is partitioned while it loads: transformers' `HfDeepSpeedConfig` (kept alive for
the job's life) makes `from_pretrained` build it inside `deepspeed.zero.Init` and load each rank's shard,
so no rank ever holds the whole model (Mixtral-8x7B is 93 GB in bf16). Each rank records what it holds
right after the load in its metrics (kind "model").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hpclaunch.config.overrides import apply_overrides, read_override, set_dropout
from hpclaunch.runtime.train.assets import fingerprint, generated, hub_asset, job_store
from hpclaunch.runtime.train.corpus import builtin_corpus
from hpclaunch.runtime.train.generate_model import auto_class, build_in_child
from hpclaunch.runtime.train.held import is_sharded, local
from hpclaunch.runtime.train.metrics import MetricsWriter, full_numel
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from transformers import (
        PreTrainedConfig,
        PreTrainedModel,
        PreTrainedTokenizerBase,
    )

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.recipe import ModelSpec
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.job import Job

_BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_EOS = "<|endoftext|>"


def _model_spec(spec: JobSpec) -> ModelSpec:
    m = spec.recipe.model
    assert m is not None, f"recipe {spec.recipe.name} has no model section"
    return m


def _train_tokenizer(kind: str, vocab_size: int, texts: list[str], out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "wordpiece":  # BERT-style, uncased
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(
            texts,
            trainers.WordPieceTrainer(
                vocab_size=vocab_size, special_tokens=_BERT_SPECIALS, show_progress=False
            ),
        )
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
        )
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    else:  # GPT-2-style byte-level BPE; every record ends with the end-of-text token
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(
            texts,
            trainers.BpeTrainer(
                vocab_size=vocab_size,
                special_tokens=[_EOS],
                show_progress=False,
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            ),
        )
        eos = tok.token_to_id(_EOS)
        tok.post_processor = processors.TemplateProcessing(single=f"$A {_EOS}", special_tokens=[(_EOS, eos)])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=_EOS, eos_token=_EOS, unk_token=_EOS)
    fast.save_pretrained(out)
    # transformers 5 names its class TokenizersBackend, which 4.x cannot load: the name both load (the store is
    # shared by jobs whose environments may have either)
    config = out / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "tokenizer_class": "PreTrainedTokenizerFast"},
                                 indent=2))


def load_tokenizer(spec: JobSpec, d: Dist) -> tuple[PreTrainedTokenizerBase, str]:
    """(tokenizer, where it came from)."""
    from transformers import AutoTokenizer

    t = spec.recipe.tokenizer
    if t is not None and t.source == "train":
        corpus = spec.recipe.dataset.corpus if spec.recipe.dataset else None
        if not corpus:
            raise ValueError("tokenizer.source: train needs dataset.source: builtin with a corpus")
        key = fingerprint("tokenizer", t.kind, t.vocab_size, corpus, 2)  # 2: loadable by transformers 4 and 5
        path = generated(
            job_store(spec),
            "tokenizers",
            key,
            lambda out: _train_tokenizer(t.kind, t.vocab_size, builtin_corpus(corpus)["train"], out),
            d,
        )
    else:
        repo = (t.repo if t and t.repo else None) or _model_spec(spec).repo
        assert repo is not None, "no tokenizer.repo and no model.repo"
        path = hub_asset(spec, "model", repo, t.revision if t else "main")
    return AutoTokenizer.from_pretrained(path), str(path)


def model_config(spec: JobSpec, tokenizer: PreTrainedTokenizerBase) -> tuple[PreTrainedConfig, list[str]]:
    """The model config: generated from model_type + config, or the staged one; then the recipe's
    model.config keys, override_config.json and train.dropout, in that order."""
    from transformers import AutoConfig

    m = _model_spec(spec)
    if m.source == "generate":
        assert m.model_type is not None  # ModelSpec's validator: source generate needs a model_type
        ids = {k: getattr(tokenizer, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
        config = AutoConfig.for_model(
            m.model_type, vocab_size=len(tokenizer), **{k: v for k, v in ids.items() if v is not None}
        )
    else:
        assert m.repo is not None  # ModelSpec's validator: source hub needs a repo
        config = AutoConfig.from_pretrained(hub_asset(spec, "model", m.repo, m.revision))
    changes = apply_overrides(config, dict(m.config), source=f"recipe {spec.recipe.name}: model.config")
    if m.override_config:
        path = Path(spec.recipe_dir) / m.override_config
        changes += apply_overrides(config, read_override(path), source=str(path))
    if spec.recipe.train.dropout is not None:
        set_dropout(config, spec.recipe.train.dropout)
    return config, changes


_ZERO3: list[Any] = []  # the HfDeepSpeedConfig of this process: transformers holds only a weak reference


def zero3_at_load(deepspeed_config: Path | None) -> bool:
    """Under ZeRO-3 (stage 3 in the job's ds_config.json), make transformers partition the model while it
    loads (`deepspeed.zero.Init`), for the rest of the process's life. False for any other stage."""
    if deepspeed_config is None:
        return False
    config = json.loads(Path(deepspeed_config).read_text())
    if int(config.get("zero_optimization", {}).get("stage", 0)) != 3:
        return False
    if not _ZERO3:
        from transformers.integrations import HfDeepSpeedConfig

        _ZERO3.append(HfDeepSpeedConfig(config))
    return True


def load_model(spec: JobSpec, tokenizer: PreTrainedTokenizerBase, d: Dist,
               deepspeed_config: Path | None = None) -> tuple[PreTrainedModel, list[str]]:
    """(model in fp32, config changes). Weights: the staged checkpoint, or a random init with the job's
    seed built once by rank 0 and cached in the store. With a ZeRO-3 `deepspeed_config` the model comes
    back partitioned over the ranks (each holds its shard); otherwise whole, on the CPU."""
    import torch

    m = _model_spec(spec)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config, changes = model_config(spec, tokenizer)
    auto = auto_class(spec.recipe.task)
    if m.source == "generate":
        seed = spec.recipe.train.seed

        def build(out: Path) -> None:  # rank 0 alone, in a child: no DeepSpeed import here, no ZeRO-3 init there
            build_in_child(config, spec.recipe.task, seed, out)

        key = fingerprint("model", spec.recipe.task, config.to_dict(), seed, 1)
        path = generated(job_store(spec), "models", key, build, d)
    else:
        assert m.repo is not None  # ModelSpec's validator: source hub needs a repo
        path = hub_asset(spec, "model", m.repo, m.revision)
    zero3_at_load(deepspeed_config)
    if d.tensor_parallel > 1:  # each rank reads only its shards (hpclaunch/runtime/train/tensor_parallel.py)
        from hpclaunch.runtime.train.tensor_parallel import compact_shards, distributed_config

        model = auto.from_pretrained(path, config=config, dtype=torch.float32, distributed_config=distributed_config(d))
        compact_shards(model)
    else:
        model = auto.from_pretrained(path, config=config, dtype=torch.float32)
    if m.source != "generate":
        embeddings = cast(torch.Tensor, model.get_input_embeddings().weight)  # typed Tensor | Module by torch
        rows = getattr(embeddings, "ds_shape", embeddings.shape)[0]  # ZeRO-3: the full shape, not the shard's
        if len(tokenizer) > rows:
            model.resize_token_embeddings(len(tokenizer))
    # Name the loss: transformers finds it from the class name, which GPT2LMHeadModel does not carry, and
    # then warns "`loss_type=None` ... unrecognized" on every rank of every run.
    loss_type = "ForMaskedLM" if spec.recipe.task == "masked-lm" else "ForCausalLM"
    model.config.loss_type = loss_type
    if hasattr(model, "loss_type"):  # the model keeps its own copy, taken from the config at __init__
        model.loss_type = loss_type
    return model, changes


def held_bytes(model: PreTrainedModel) -> tuple[int, int, int]:
    """(parameters, bytes of parameters this rank holds, bytes of the whole model's parameters): under
    ZeRO-3 a rank holds its shard (`ds_tensor`), under tensor parallelism its DTensor shards, elsewhere
    the whole tensor."""
    count = held = total = 0
    for p in model.parameters():
        n = full_numel(p)
        count += n
        total += n * p.element_size()
        shard = getattr(p, "ds_tensor", None)
        mine = shard if shard is not None else local(p)
        held += mine.numel() * mine.element_size()
    return count, held, total


def sharded_bytes(model: PreTrainedModel) -> tuple[int, int]:
    """Tensor parallel: (bytes of the weights split over the mesh, the bytes of them this rank holds)."""
    whole = mine = 0
    for p in model.parameters():
        if is_sharded(p):
            whole += p.numel() * p.element_size()
            mine += local(p).numel() * p.element_size()
    return whole, mine


def load_tokenizer_and_model(
    j: Job, d: Dist, log: Callable[[str], None]
) -> tuple[PreTrainedTokenizerBase, str, PreTrainedModel]:
    """The tokenizer (and where it came from, which keys the data cache) and the model, logging the
    config changes made by overrides and the parameter count; each rank records in its metrics the
    parameter bytes it holds right after the load (ZeRO-3: its shard)."""
    tokenizer, tokenizer_src = load_tokenizer(j.spec, d)
    model, changes = load_model(j.spec, tokenizer, d, j.deepspeed_config)
    for change in changes:
        log(f"config {change}")
    if d.is_main:  # what `hpclaunch export` needs besides the weights (config, tokenizer): a few kB
        folder = RunFiles(j.run_dir).model_files
        model.config.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    model.config.use_cache = False  # a training step builds no key/value cache (the saved config keeps it)
    count, held, total = held_bytes(model)
    extra: dict[str, int] = {}
    if d.tensor_parallel > 1:
        whole, mine = sharded_bytes(model)
        extra = {"tensor_parallel": d.tensor_parallel, "sharded_param_bytes": whole, "held_sharded_bytes": mine}
    MetricsWriter(j.run_dir, d.rank, trackers=False).write(
        "model", params=count, param_bytes=total, held_param_bytes=held, world_size=d.world_size, **extra)
    how = f"tensor parallel {d.tensor_parallel} x data parallel {d.dp_size}" if extra else "partitioned at load"
    shard = f", {how}: this rank holds {held / 2**20:.1f} of {total / 2**20:.1f} MiB"
    log(f"model: {count / 1e6:.2f}M parameters" + (shard if held < total else ""))
    timeline.mark("model_loaded")  # rank 0
    return tokenizer, tokenizer_src, model
