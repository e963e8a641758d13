"""On the dev Slurm cluster: a tiny 2-node GPT-2 job's `status --json` has the start-up timeline with every
phase in order, the job script's own work before the launch takes under a second, and the run directory has
TensorBoard events that tensorboard's event reader gives back with the losses of the metrics JSON lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]


def _cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home)})


@pytest.mark.slurm
@pytest.mark.slow
def test_two_node_job_has_every_phase_in_order_and_tensorboard_events(tmp_path):
    home = tmp_path / "home"
    proc = _cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", "dev-slurm", "--preset", "tiny",
                "--nodes", "2", "--gpus-per-node", "1", "--set", "train.max_steps=4", "--set", "train.log_every=1",
                "--set", "train.save_every=0", "--set", "train.eval_steps=2", "--follow", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE)
    assert job, proc.stdout[-2000:]

    status = json.loads(_cli(home, "status", job.group(1), "--json").stdout)
    (entry,) = status["timeline"]
    assert entry["job"] == job.group(1)
    stamped = sorted(entry["phases"], key=entry["phases"].get)
    # dev-slurm pins python.stage shared: no environment packed, staged or fallen back from; no container
    absent = ("env_packed", "env_staged", "env_fallback", "container_started")
    assert stamped == [p for p in timeline.PHASES if p not in absent], stamped
    assert list(entry["durations"]) == [s for p, s in timeline.SPANS.items() if p not in absent]
    # module load is in `env`, not here: the job script's own span is the few lines before it (under 1 s on a quiet
    # machine; 10 s leaves room for the suite's other workers on the same 2 cores)
    assert entry["durations"]["job_script"] < 10.0, entry["durations"]
    text = _cli(home, "status", job.group(1)).stdout
    assert "timeline: queued " in text and "start-up " in text, text

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = RunFiles(Path(status["run_dir"]))
    losses = {r["step"]: r["loss"] for r in map(json.loads, run.metrics_file(0).read_text().splitlines())
              if r["kind"] == "train"}
    acc = EventAccumulator(str(run.tensorboard))
    acc.Reload()
    events = {e.step: e.value for e in acc.Scalars("train/loss")}
    assert sorted(events) == sorted(losses) == [1, 2, 3, 4]
    for step, loss in losses.items():
        assert events[step] == pytest.approx(loss, rel=1e-6)
