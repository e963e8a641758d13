"""Checkpoints: RUN_DIR/checkpoints/step-<N>/, complete or absent, the two newest kept. A job resumes from the
newest by itself.

Each holds the engine's state (model, optimizer, scheduler; DeepSpeed's own layout under DeepSpeed), the step
and data position, and every rank's RNG states (rng-rank-<R>.pt).

Saving blocks training only for the copy off the device: the engine's state is copied to CPU memory (plain
PyTorch: rank 0's state.pt; DeepSpeed: every rank's own files of its save_checkpoint, dscheckpoint.py), then a
background thread writes it into .tmp-step-<N>/, fsyncs each file and leaves a marker per rank;
rank 0's thread, once every rank's marker is there, renames the folder to step-<N> (atomic) and appends a line to
RUN_DIR/checkpoints.jsonl with the blocked and the write time. A writer killed before the rename leaves only the
.tmp- folder, which resume never picks and the next save removes. The next save, and the end of the run (done,
a stop for a signal or the time limit), wait for a pending write. The copy is the memory price: until it is
written, each rank holds its part of the checkpoint twice in host memory. A DeepSpeed config that needs DeepSpeed
to write itself (its own checkpoint engine, NVMe offload: dscheckpoint.blocking) saves synchronously: the whole
save blocks, rank 0's log says why once, and the record says so (async false).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hpclaunch.runtime.train import nodeassets
from hpclaunch.runtime.train.durable import fsync as _fsync
from hpclaunch.state.runfiles import CHECKPOINT_PREFIX, CHECKPOINTS_KEPT, ENV_RESTART, RunFiles

if TYPE_CHECKING:
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.engine import Engine

_STEP = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
KEEP = CHECKPOINTS_KEPT
TMP_PREFIX = f".tmp-{CHECKPOINT_PREFIX}"
DONE_PREFIX = ".done-rank-"
MARKERS_TIMEOUT_S = 1800.0  # rank 0 waits this long for the other ranks' writes before it gives the save up


def latest(run_dir: Path) -> Path | None:
    newest = RunFiles(run_dir).latest_checkpoint()
    return newest[1] if newest else None


def rng_state(d: Dist) -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if d.accelerator != "cpu":
        state["device"] = d.module.get_rng_state(d.device)
    return state


def set_rng_state(state: dict[str, Any], d: Dist) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "device" in state:
        d.module.set_rng_state(state["device"], d.device)


def _write(obj: Any, path: Path) -> None:
    torch.save(obj, path)
    _fsync(path)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class _Write:
    """One checkpoint's write on one rank: its files, its marker; on rank 0 the rename and the record."""

    files: RunFiles
    d: Dist
    step: int
    why: str
    tmp: Path
    final: Path
    payload: dict[str, Any]  # file name -> object to torch.save (the engine's CPU copy, this rank's RNG)
    saved_at: float  # when the save began (perf_counter): a synchronous write blocks from there to the rename
    asynchronous: bool
    t0: float = field(default_factory=time.perf_counter)  # when the write began

    def run(self) -> None:
        for name, obj in self.payload.items():
            _write(obj, self.tmp / name)
        (self.tmp / f"{DONE_PREFIX}{self.d.rank}").touch()
        if self.d.is_main:
            self._publish()

    def _publish(self) -> None:
        """Rank 0: every rank's files are there, so the folder becomes the checkpoint (rename), then the record."""
        deadline = time.monotonic() + MARKERS_TIMEOUT_S
        while len(list(self.tmp.glob(f"{DONE_PREFIX}*"))) < self.d.world_size:
            if time.monotonic() > deadline:
                raise TimeoutError(f"checkpoint of step {self.step}: not every rank wrote its part within "
                                   f"{MARKERS_TIMEOUT_S:.0f} s; {self.tmp} is left incomplete (never resumed from)")
            time.sleep(0.1)
        for marker in self.tmp.glob(f"{DONE_PREFIX}*"):
            marker.unlink()
        for p in self.tmp.rglob("*"):
            if p.is_file():
                _fsync(p)  # DeepSpeed's files too
        shutil.rmtree(self.final, ignore_errors=True)
        os.replace(self.tmp, self.final)
        _fsync(self.final.parent)
        done = (p for p in self.final.parent.glob(f"{CHECKPOINT_PREFIX}*") if _STEP.match(p.name))
        for old in sorted(done, key=lambda p: p.name)[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)
        self._record(time.perf_counter() - self.t0)

    def _record(self, write_s: float) -> None:
        blocked = (self.t0 if self.asynchronous else time.perf_counter()) - self.saved_at
        rec = {"step": self.step, "why": self.why, "blocked_s": round(blocked, 4),
               "write_s": round(write_s, 4), "bytes": _size(self.final), "async": self.asynchronous,
               "restart": int(os.environ.get(ENV_RESTART, "0") or 0), "job": os.environ.get("HPCLAUNCH_JOB_ID", ""),
               "at": round(time.time(), 3), "path": str(self.final)}
        with open(self.files.checkpoint_log, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")


class Saver:
    """Checkpoints of one run, one write at a time (the next save and the end of the run wait for it)."""

    def __init__(self, run_dir: Path, d: Dist) -> None:
        self.files, self.d = RunFiles(run_dir), d
        self.pending: threading.Thread | None = None
        self.failed: BaseException | None = None

    def save(self, engine: Engine, step: int, client_state: dict[str, Any], why: str) -> Path:
        """Blocks for the copy off the device (or, where the engine writes synchronously, the whole write);
        returns the folder the checkpoint will have once written."""
        t0 = time.perf_counter()
        self.wait()
        root = self.files.checkpoints
        final, tmp = root / f"{CHECKPOINT_PREFIX}{step:08d}", root / f"{TMP_PREFIX}{step:08d}"
        if self.d.is_main:
            for left in root.glob(f"{TMP_PREFIX}*"):  # a killed writer's (never resumed from)
                shutil.rmtree(left, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.d.barrier()
        payload = {f"rng-rank-{self.d.rank}.pt": rng_state(self.d)}
        state = {**client_state, "step": step}
        copied = engine.snapshot(tmp, state)
        job = _Write(self.files, self.d, step, why, tmp, final, {**payload, **(copied or {})}, t0, copied is not None)
        if copied is None:
            engine.save(tmp, state)
            job.run()
        else:
            self.pending = threading.Thread(target=self._guarded, args=(job,), name=f"checkpoint-{step}")
            self.pending.start()
        return final

    def _guarded(self, job: _Write) -> None:
        try:
            job.run()
        except BaseException as exc:  # raised again in the training thread, at the next save or the end
            self.failed = exc

    def wait(self) -> None:
        """Until the pending write is done; its failure raised here."""
        if self.pending is not None:
            self.pending.join()
            self.pending = None
        if self.failed is not None:
            failed, self.failed = self.failed, None
            raise RuntimeError(f"writing a checkpoint failed: {failed}") from failed


def load(engine: Engine, path: Path, d: Dist) -> dict[str, Any]:
    path = nodeassets.local_checkpoint(path)  # assets.stage node-local: this node's copy
    client = engine.load(path)
    rng = path / f"rng-rank-{d.rank}.pt"
    if rng.is_file():
        set_rng_state(torch.load(rng, weights_only=False), d)
    return client
