"""A checkpoint is complete or absent (hpclaunch/runtime/train/checkpoint.py): a real process killed while it
writes leaves only a .tmp- folder, which resume never picks and the next save removes; a background write is
recorded with its blocked and write time and leaves no marker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from hpclaunch.report import checkpoints
from hpclaunch.state.runfiles import RunFiles

WRITER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    import torch
    from hpclaunch.runtime.train.checkpoint import Saver
    from hpclaunch.runtime.train.cpucopy import to_cpu
    from hpclaunch.runtime.train.distributed import Dist

    class Stall:
        """Pickling it stops the writer mid-file, as a slow filesystem would, until the test kills it."""
        def __deepcopy__(self, memo):  # the snapshot's copy (cpucopy.to_cpu) is itself: only the write stalls
            return self
        def __reduce__(self):
            print("writing", flush=True)
            time.sleep(3600)

    class Engine:  # what the Saver asks of an engine: a CPU copy of rank 0's state
        def __init__(self):
            self.weights = torch.arange(1000.0)
        def snapshot(self, path, client):
            return {"state.pt": to_cpu({"model": {"w": self.weights}, "client": client})}
        def save(self, path, client):
            raise AssertionError("a background write was expected")

    d = Dist(rank=0, world_size=1, local_rank=0, accelerator="cpu", backend="gloo", device=torch.device("cpu"))
    saver, engine = Saver(Path(sys.argv[1]), d), Engine()
    saver.save(engine, 1, {"data": 1}, "interval")
    engine.weights += 1  # training goes on: the pending write keeps the state of step 1
    saver.save(engine, 2, {"data": 2}, "interval")  # waits for step 1's write first
    if sys.argv[2] == "stall":
        saver.save(engine, 3, {"stall": Stall()}, "end")
    saver.wait()
    print("done", flush=True)
''')


def _run(run_dir: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "HPCLAUNCH_RESTART": "0"}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir), mode], stdout=subprocess.PIPE, text=True,
                            env=env)


def test_a_writer_killed_mid_write_leaves_no_checkpoint_that_resume_would_pick(tmp_path):
    import torch

    files = RunFiles(tmp_path)
    proc = _run(tmp_path, "stall")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"  # inside torch.save of step 3's state.pt
    partial = files.checkpoints / ".tmp-step-00000003" / "state.pt"
    deadline = time.monotonic() + 60
    while not partial.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert partial.exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)

    step, path = files.latest_checkpoint() or (None, None)
    assert step == 2 and path is not None and path.name == "step-00000002"
    state = torch.load(path / "state.pt", weights_only=False)
    assert state["client"] == {"data": 2, "step": 2} and float(state["model"]["w"][0]) == 1.0
    assert [r["step"] for r in checkpoints.load(files)] == [1, 2]

    again = _run(tmp_path, "plain")  # the next run's first save removes the killed writer's folder
    assert again.communicate(timeout=120)[0].strip() == "done"
    assert sorted(p.name for p in files.checkpoints.iterdir()) == ["step-00000001", "step-00000002"]


def test_a_background_write_is_recorded_and_keeps_the_state_it_copied(tmp_path):
    import torch

    proc = _run(tmp_path, "plain")
    assert proc.communicate(timeout=120)[0].strip() == "done"
    files = RunFiles(tmp_path)
    first = torch.load(files.checkpoints / "step-00000001" / "state.pt", weights_only=False)
    assert float(first["model"]["w"][0]) == 0.0  # copied before training changed the weights
    recs = checkpoints.load(files)
    assert [(r["step"], r["why"], r["async"]) for r in recs] == [(1, "interval", True), (2, "interval", True)]
    assert all(r["blocked_s"] >= 0 and r["write_s"] > 0 and r["bytes"] > 4000 for r in recs)
    assert not list(files.checkpoints.rglob(".done-rank-*"))
    text = checkpoints.describe(recs[0], lambda n: f"{n:.0f} B")
    assert text.startswith("checkpoint step 1 (interval): blocked ") and "in the background" in text
