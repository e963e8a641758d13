"""Checkpoints: RUN_DIR/checkpoints/step-<N>/ written atomically (into .tmp-step-<N>, renamed when
every rank has written its part), the two newest kept. A job resumes from the newest by itself.

Each holds the engine's state (model, optimizer, scheduler; DeepSpeed's own layout under DeepSpeed),
the step and data position, and every rank's RNG states (rng-rank-<R>.pt).
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hpclaunch.state.runfiles import CHECKPOINT_PREFIX, CHECKPOINTS_KEPT, RunFiles

if TYPE_CHECKING:
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.engine import Engine

_STEP = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
KEEP = CHECKPOINTS_KEPT


def latest(run_dir: Path) -> Path | None:
    newest = RunFiles(run_dir).latest_checkpoint()
    return newest[1] if newest else None


def _rng_state(d: Dist) -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if d.accelerator != "cpu":
        state["device"] = d.module.get_rng_state(d.device)
    return state


def _set_rng_state(state: dict[str, Any], d: Dist) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "device" in state:
        d.module.set_rng_state(state["device"], d.device)


def save(engine: Engine, run_dir: Path, step: int, client_state: dict[str, Any], d: Dist) -> Path:
    root = RunFiles(run_dir).checkpoints
    final, tmp = root / f"{CHECKPOINT_PREFIX}{step:08d}", root / f".tmp-{CHECKPOINT_PREFIX}{step:08d}"
    if d.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    d.barrier()
    engine.save(tmp, {**client_state, "step": step})
    torch.save(_rng_state(d), tmp / f"rng-rank-{d.rank}.pt")
    d.barrier()
    if d.is_main:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        done = (p for p in root.glob(f"{CHECKPOINT_PREFIX}*") if _STEP.match(p.name))
        old = sorted(done, key=lambda p: p.name)[:-KEEP]
        for p in old:
            shutil.rmtree(p, ignore_errors=True)
    d.barrier()
    return final


def load(engine: Engine, path: Path, d: Dist) -> dict[str, Any]:
    client = engine.load(path)
    rng = path / f"rng-rank-{d.rank}.pt"
    if rng.is_file():
        _set_rng_state(torch.load(rng, weights_only=False), d)
    return client
