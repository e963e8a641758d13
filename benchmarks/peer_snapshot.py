"""Recovery from a peer: what the in-memory snapshot costs a training step on the CPU (hpclaunch/runtime/train/peer.py,
dspeer.py).

One process, GPT-2 built from its config (no assets): for each size it trains a few steps and times, per step, the
optimizer step (forward, backward, update) and `take` (the torch engine: the node's copy of the replica's model and
AdamW state into its slot in /dev/shm; DeepSpeed ZeRO-2: the rank's own partition, its fp32 master slice and AdamW
state, into its own slot; then the marker and the rank's RNG states). Prints one JSON object: per size the state's
bytes, the median step and snapshot seconds, and their ratio.

    python benchmarks/peer_snapshot.py                     # torch engine: tiny (2 layers, 64 wide) and GPT-2 124M
    python benchmarks/peer_snapshot.py --engine deepspeed  # DeepSpeed ZeRO-2 on one rank (its partition is all)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.config.recipe import TrainSpec  # noqa: E402
from hpclaunch.runtime.train.distributed import Dist  # noqa: E402
from hpclaunch.runtime.train.engine import TorchEngine  # noqa: E402
from hpclaunch.runtime.train.peer import Snapshots  # noqa: E402

DS_CONFIG = {"train_batch_size": 0, "train_micro_batch_size_per_gpu": 0, "gradient_accumulation_steps": 1,
             "zero_optimization": {"stage": 2}, "zero_force_ds_cpu_optimizer": False, "steps_per_print": 10**9}

SIZES = {"tiny": {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 1000, "seq": 128, "batch": 8},
         "small": {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "seq": 128, "batch": 2}}


def _engine(kind: str, model: torch.nn.Module, steps: int, batch: int, tmp: Path) -> tuple[object, Snapshots]:
    """The engine and its snapshots in `tmp` (node memory)."""
    train = TrainSpec(max_steps=steps, warmup_steps=1)
    if kind == "torch":
        d = Dist(0, 1, 0, "cpu", "gloo", torch.device("cpu"))
        engine = TorchEngine(model, train, d, "fp32", grad_accum=1)  # type: ignore[arg-type]
        return engine, Snapshots(d, engine, 1, Path(tmp) / "node", Path(tmp), log=print)
    from hpclaunch.runtime.train.distributed import init_distributed
    from hpclaunch.runtime.train.dspeer import PartitionSnapshots
    from hpclaunch.runtime.train.engine import DeepSpeedEngine

    d = init_distributed(deepspeed=True, threads=2)  # a world of one
    config = Path(tmp) / "ds_config.json"
    config.write_text(json.dumps({**DS_CONFIG, "train_batch_size": batch, "train_micro_batch_size_per_gpu": batch}))
    ds = DeepSpeedEngine(model, train, d, config)  # type: ignore[arg-type]
    return ds, PartitionSnapshots(d, ds, 1, Path(tmp) / "node.rank0", Path(tmp), log=print)


def measure(name: str, steps: int, kind: str = "torch") -> dict[str, object]:
    from transformers import GPT2Config, GPT2LMHeadModel

    size = SIZES[name]
    cfg = GPT2Config(n_layer=size["n_layer"], n_embd=size["n_embd"], n_head=size["n_head"],
                     vocab_size=size["vocab_size"], n_positions=size["seq"], resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        engine, snaps = _engine(kind, GPT2LMHeadModel(cfg), steps, size["batch"], Path(tmp))
        step_s, take_s = [], []
        for step in range(1, steps + 1):
            ids = torch.randint(0, size["vocab_size"], (size["batch"], size["seq"]))
            t0 = time.perf_counter()
            engine.zero_grad()  # type: ignore[attr-defined]
            engine.micro_step({"input_ids": ids, "labels": ids}, last=True)  # type: ignore[attr-defined]
            engine.step()  # type: ignore[attr-defined]
            t1 = time.perf_counter()
            snaps.take(step, {"data": {"epoch": 0, "index": step}})
            t2 = time.perf_counter()
            if step > 1:  # the first take makes the slots
                step_s.append(t1 - t0)
                take_s.append(t2 - t1)
        nbytes = snaps.store.layout.nbytes if snaps.store.layout else 0
        snaps.close()
    step_med, take = statistics.median(step_s), statistics.median(take_s)
    return {"params": sum(p.numel() for p in engine.module.parameters()), "state_bytes": nbytes,  # type: ignore[attr-defined]
            "step_s": round(step_med, 4), "snapshot_s": round(take, 4), "snapshot_share": round(take / step_med, 4),
            "copy_gb_per_s": round(nbytes / take / 1e9, 2), "steps_timed": len(step_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("torch", "deepspeed"), default="torch")
    kind = parser.parse_args().engine
    torch.set_num_threads(2)
    print(json.dumps({"torch": torch.__version__, "engine": kind,
                      **{name: measure(name, n, kind) for name, n in (("tiny", 30), ("small", 8))}}, indent=1))


if __name__ == "__main__":
    main()
