"""Rule 8 on the real dev cluster: a job warned of preemption (Slurm's USR1, as `--signal=B:USR1@120`
sends before the time limit) checkpoints, requeues itself and resumes from the checkpoint; the logs of
both runs are kept, and the training steps continue where they stopped. Its W&B offline runs (one per start,
written on the compute node with no network) upload as one run whose history has every step once. Through both
backends (Slurm's commands; slurmrestd)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from hpclaunch.runtime.train.tracking import wandb_run_id
from hpclaunch.state.runfiles import RunFiles
from tests.fixtures.wandbserver.server import WandbServer
from tests.integration.test_slurm_launch import env, hpclaunch, needs_slurm, submit, wait_state  # noqa: F401


def _train_steps(run_dir: Path) -> list[int]:
    path = run_dir / "metrics" / "rank-0.jsonl"
    if not path.is_file():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["step"] for r in records if "loss" in r and "eval_loss" not in r]


@needs_slurm
@pytest.mark.slurm
@pytest.mark.slow
def test_preempted_job_checkpoints_requeues_and_resumes(env, backend):  # noqa: F811
    """Over 30 s: a run to step 10, the checkpoint at USR1, the requeue and a second run to step 300."""
    env = backend.env(env)
    sub = submit(env, "recipes/gpt2", *backend.args, "--preset", "tiny", "--layout", "1n2g",
                 "--set", "train.max_steps=300", "--set", "train.log_every=5", "--set", "train.save_every=0",
                 "--set", "tracking.wandb.project=requeue")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    wait_state(env, job, {"RUNNING"}, timeout=120)
    deadline = time.time() + 300
    while time.time() < deadline and not any(s >= 10 for s in _train_steps(run_dir)):
        time.sleep(1)
    assert _train_steps(run_dir), "the job logged no training step"
    subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
    seen = wait_state(env, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=600)
    assert seen[-1] == "COMPLETED", seen

    logs = run_dir / "logs"
    first, second = logs / "rank-0.restart-0.log", logs / "rank-0.restart-1.log"
    assert first.is_file() and second.is_file(), sorted(p.name for p in logs.iterdir())
    assert "stopped at step" in first.read_text()
    resumed = [line for line in second.read_text().splitlines() if "resumed from" in line]
    assert resumed, second.read_text()[-2000:]
    batch_out = (logs / f"job.{job}.out").read_text()
    assert "requeueing job" in batch_out and "restart 1" in batch_out

    steps = _train_steps(run_dir)
    assert steps == sorted(set(steps)), f"steps repeated or out of order across the requeue: {steps}"
    assert steps[-1] == 300

    segments = RunFiles(run_dir).wandb_offline_runs()
    assert len(segments) == 2 and all(p.name.endswith(wandb_run_id(run_dir)) for p in segments), segments
    before = hpclaunch(env, "status", job).stdout
    assert f"2 offline run(s), 2 not uploaded: `hpclaunch sync {job}`" in before, before
    with WandbServer() as wb:
        hpclaunch({**env, "WANDB_BASE_URL": wb.url, "WANDB_API_KEY": "k" * 40}, "sync", job)
        (run,) = wb.runs.values()
    uploaded = [h["_step"] for h in run.history if "train/loss" in h]
    assert uploaded == steps, (uploaded, steps)
    assert json.loads(hpclaunch(env, "status", job, "--json").stdout)["wandb"]["not_uploaded"] == 0
