"""Recovery from a peer: what the in-memory snapshot costs a training step on the CPU (hpclaunch/runtime/train/peer.py).

One process, the torch engine on GPT-2 built from its config (no assets): for each size it trains a few steps and
times, per step, the optimizer step (forward, backward, update) and `Snapshots.take` (the node's copy of the
replica's model and AdamW state into its slot in /dev/shm, the marker, the rank's RNG states). Prints one JSON
object: per size the state's bytes, the median step and snapshot seconds, and their ratio.

    python benchmarks/peer_snapshot.py                 # tiny (2 layers, 64 wide) and small (GPT-2 124M)
"""

from __future__ import annotations

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

SIZES = {"tiny": {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 1000, "seq": 128, "batch": 8},
         "small": {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "seq": 128, "batch": 2}}


def measure(name: str, steps: int) -> dict[str, object]:
    from transformers import GPT2Config, GPT2LMHeadModel

    size = SIZES[name]
    cfg = GPT2Config(n_layer=size["n_layer"], n_embd=size["n_embd"], n_head=size["n_head"],
                     vocab_size=size["vocab_size"], n_positions=size["seq"], resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    torch.manual_seed(0)
    d = Dist(0, 1, 0, "cpu", "gloo", torch.device("cpu"))
    engine = TorchEngine(GPT2LMHeadModel(cfg), TrainSpec(max_steps=steps, warmup_steps=1), d, "fp32", grad_accum=1)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        snaps = Snapshots(d, engine, 1, Path(tmp) / "node", Path(tmp), log=print)
        step_s, take_s = [], []
        for step in range(1, steps + 1):
            ids = torch.randint(0, size["vocab_size"], (size["batch"], size["seq"]))
            t0 = time.perf_counter()
            engine.zero_grad()
            engine.micro_step({"input_ids": ids, "labels": ids}, last=True)
            engine.step()
            t1 = time.perf_counter()
            snaps.take(step, {"data": {"epoch": 0, "index": step}})
            t2 = time.perf_counter()
            if step > 1:  # the first take makes the slots
                step_s.append(t1 - t0)
                take_s.append(t2 - t1)
        nbytes = snaps.store.layout.nbytes if snaps.store.layout else 0
        snaps.close()
    step, take = statistics.median(step_s), statistics.median(take_s)
    return {"params": sum(p.numel() for p in engine.module.parameters()), "state_bytes": nbytes,
            "step_s": round(step, 4), "snapshot_s": round(take, 4), "snapshot_share": round(take / step, 4),
            "copy_gb_per_s": round(nbytes / take / 1e9, 2), "steps_timed": len(step_s)}


def main() -> None:
    torch.set_num_threads(2)
    print(json.dumps({"torch": torch.__version__, **{name: measure(name, n) for name, n in
                                                     (("tiny", 30), ("small", 8))}}, indent=1))


if __name__ == "__main__":
    main()
