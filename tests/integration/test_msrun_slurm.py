"""gpt_mindspore under msrun on the dev Slurm cluster (CPU, 2 nodes x 2 workers, each node in its own
network namespace so only node 0 starts msrun's scheduler): it trains (loss falls, every rank ends
with the same parameters), a failing worker makes the job FAILED with the worker's own exit code,
`hpclaunch cancel` leaves no msrun, scheduler or worker process behind, and a job told to stop (Slurm's USR1)
saves, requeues and goes on from its checkpoint, as `hpclaunch resume` does.

Needs the MindSpore venv: scripts/install-mindspore.sh. Minutes on 2 CPU cores.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from hpclaunch.schedulers import get_scheduler
from hpclaunch.state.runfiles import read_json_lines
from tests.integration.waiting import Deadline

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "recipes" / "gpt_mindspore")
VENV = Path("/opt/hpclaunch-venvs/mindspore")

pytestmark = [
    pytest.mark.slurm, pytest.mark.slow,
    pytest.mark.skipif(not (VENV / "bin" / "msrun").exists(), reason="run scripts/install-mindspore.sh"),
]


@pytest.fixture
def hpc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Like conftest's, but outside pytest's tmp folders: other sessions' pytest runs on this machine
    prune those while a job may still be writing into its run directory."""
    home = Path(tempfile.mkdtemp(prefix="hpclaunch-msrun-test-", dir="/tmp"))
    monkeypatch.setenv("HPCLAUNCH_HOME", str(home))
    monkeypatch.setenv("HPCLAUNCH_PATH", str(REPO / "tests" / "fixtures"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _submit(hpclaunch, *extra: str) -> tuple[str, Path]:
    result = hpclaunch("submit", RECIPE, "--profile", "dev-slurm", "--preset", "tiny", "--nodes", "2",
                       "--gpus-per-node", "2", *extra)
    assert result.exit_code == 0, result.output
    job_id = re.search(r"submitted job (\d+)", result.output)[1]
    run_dir = Path(re.search(r"run directory: (\S+)", result.output)[1])
    return job_id, run_dir


def _wait(job_id: str, timeout: float = 600):
    slurm = get_scheduler("slurm")
    deadline = Deadline(timeout, [job_id])  # its time queued for nodes not counted
    while not deadline.expired():
        st = slurm.status([job_id]).get(job_id)
        if st is not None and st.finished:
            return st
        time.sleep(1)
    subprocess.run(["scancel", job_id], check=False)
    pytest.fail(f"job {job_id} did not finish within {timeout} s (+{deadline.queued:.0f} s queued)")


def _worker_logs(run_dir: Path) -> dict[int, str]:
    logs = {}
    for path in (run_dir / "logs" / "msrun").glob("node*.restart-0/worker_*.log"):
        logs[int(path.stem.split("_")[1])] = path.read_text(errors="replace")
    return logs


def _leftovers(run_dir: Path) -> list[str]:
    proc = subprocess.run(["pgrep", "-af", str(run_dir)], capture_output=True, text=True)
    return [line for line in proc.stdout.splitlines() if "pgrep" not in line]


def test_tiny_trains_on_two_nodes_and_ranks_agree(hpclaunch):
    """Over 30 s: MindSpore's import and graph compile in each of 4 workers on 2 nodes, on 2 shared cores."""
    job_id, run_dir = _submit(hpclaunch)
    st = _wait(job_id)
    assert st.state == "COMPLETED", (st, (run_dir / "logs" / f"job.{job_id}.out").read_text()[-3000:])
    logs = _worker_logs(run_dir)
    assert sorted(logs) == [0, 1, 2, 3]
    assert (run_dir / "logs/msrun/node0.restart-0/scheduler.log").is_file()
    assert not (run_dir / "logs/msrun/node1.restart-0/scheduler.log").exists()  # node1 is not the master
    sums = set()
    for rank, text in logs.items():
        losses = [float(x) for x in re.findall(r"train: Step:\d+/\d+, Loss: ([\d.]+)", text)]
        assert len(losses) >= 3, text[-2000:]
        assert losses[-1] < losses[0] - 1.0, (rank, losses)
        assert "Time: " in text and "Tokens/s: " in text
        sums.add(re.search(r"param_checksum: ([0-9a-f]{64})", text)[1])
        lines = (run_dir / "metrics" / f"rank-{rank}.jsonl").read_text().splitlines()
        metrics = [json.loads(line) for line in lines]
        train = [m for m in metrics if "loss" in m]
        assert metrics[-1]["event"] == "end" and train[0]["loss"] > train[-1]["loss"]
        assert metrics[-2]["step"] == 16 and "eval_loss" in metrics[-2]  # eval_every 0: at the end
    assert len(sums) == 1, sums  # data parallel: every rank holds the same parameters
    assert (run_dir / "checkpoints" / "step-00000016" / "gpt.ckpt").is_file()  # the final one
    assert not _leftovers(run_dir)
    # the memory plan's parameter count (arithmetic on the config, hpclaunch/plan/mindspore.py) is the model's
    counted = int(re.search(r"target CPU float32, ([\d,]+) parameters", logs[0])[1].replace(",", ""))
    plan = hpclaunch("plan", RECIPE, "--profile", "dev-slurm", "--preset", "tiny", "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["params"] == counted


def test_batch_eval_checkpoint_and_tied_keys_are_honoured(hpclaunch):
    """The keys resolved.yaml records are the ones the script trains with: the global batch (micro x accum x
    data parallel), evaluation every eval_every steps, a checkpoint every save_every steps, tied embeddings.
    Over 30 s: MindSpore's import and graph compile in 4 workers, with evaluation and a checkpoint.
    """
    job_id, run_dir = _submit(hpclaunch, "--set", "train.global_batch_size=64", "--set", "train.max_steps=8",
                              "--set", "train.eval_every=4", "--set", "train.save_every=4", "--set",
                              "model.config.untie_embeddings_and_output_weights=false")
    st = _wait(job_id)
    assert st.state == "COMPLETED", (st, (run_dir / "logs" / f"job.{job_id}.out").read_text()[-3000:])
    assert "global_batch_size: 64" in (run_dir / "resolved.yaml").read_text()
    logs = _worker_logs(run_dir)
    for rank, text in logs.items():
        assert "global batch 8 x 2 x 4 = 64" in text, text[-2000:]
        assert [int(s) for s in re.findall(r"eval: Step:(\d+), Loss: [\d.]+, Perplexity", text)] == [4, 8], rank
    evals = [json.loads(line) for line in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()
             if "eval_loss" in line]
    assert [e["step"] for e in evals] == [4, 8] and evals[1]["eval_loss"] < evals[0]["eval_loss"] + 0.5
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-00000004", "step-00000008"]
    counted = int(re.search(r"float32, ([\d,]+) parameters", logs[0])[1].replace(",", ""))
    plan = hpclaunch("plan", RECIPE, "--profile", "dev-slurm", "--preset", "tiny", "--json",
                     "--set", "model.config.untie_embeddings_and_output_weights=false")
    assert json.loads(plan.stdout)["params"] == counted


def test_failing_worker_fails_the_job_with_its_code(hpclaunch):
    fail = "args=[--fail-rank, '3', --fail-step, '2', --fail-code, '7']"
    job_id, run_dir = _submit(hpclaunch, "--set", fail)
    st = _wait(job_id)
    out = (run_dir / "logs" / f"job.{job_id}.out").read_text(errors="replace")
    assert st.state == "FAILED", (st, out[-3000:])
    if st.exit_code:
        assert st.exit_code.split(":")[0] == "7", st
    assert "msrun worker rank 3 on node 1 failed with exit code 7" in out
    assert "worker_3.log" in out
    diagnosis = hpclaunch("logs", job_id, "--diagnose")
    assert "rank 3" in diagnosis.output, diagnosis.output
    assert not _leftovers(run_dir)


def test_cancel_leaves_no_msrun_scheduler_or_worker(hpclaunch):
    job_id, run_dir = _submit(hpclaunch, "--set", "train.max_steps=2000")
    deadline = Deadline(300, [job_id])
    while not deadline.expired():
        logs = _worker_logs(run_dir)
        if len(logs) == 4 and all("train: Step:1/" in t for t in logs.values()):
            break
        time.sleep(1)
    else:
        subprocess.run(["scancel", job_id], check=False)
        pytest.fail("the workers did not start training within 300 s")
    assert len(_leftovers(run_dir)) >= 5  # msrun x2, scheduler, 4 workers are running
    result = hpclaunch("cancel", job_id)
    assert result.exit_code == 0, result.output
    st = _wait(job_id, timeout=120)
    assert st.state == "CANCELLED"
    deadline = time.monotonic() + 30
    while _leftovers(run_dir) and time.monotonic() < deadline:
        time.sleep(1)
    assert not _leftovers(run_dir), _leftovers(run_dir)


def _first_steps(run_dir: Path) -> dict[int, int]:
    """restart -> the first training step rank 0 recorded in it (the job's own metrics)."""
    first: dict[int, int] = {}
    for rec in read_json_lines(run_dir / "metrics" / "rank-0.jsonl"):
        if "loss" in rec and "restart" in rec:
            first.setdefault(rec["restart"], rec["step"])
    return first


def _until_started(run_dir: Path, restart: int, job_id: str) -> int:
    """The first step of `restart`, once rank 0 recorded it."""
    deadline, slurm = Deadline(300, [job_id]), get_scheduler("slurm")
    while restart not in _first_steps(run_dir):
        deadline.check(f"job {job_id} recorded no step of restart {restart}")
        st = slurm.status([job_id]).get(job_id)
        assert st is None or not st.finished, (st, (run_dir / "logs" / f"job.{job_id}.out").read_text()[-3000:])
        time.sleep(0.5)
    return _first_steps(run_dir)[restart]


def _checkpoints(run_dir: Path, why: str) -> list[int]:
    return [rec["step"] for rec in read_json_lines(run_dir / "checkpoints.jsonl") if rec.get("why") == why]


def test_a_stopped_job_requeues_and_resumes_from_its_checkpoint_as_resume_does(hpclaunch):
    """Slurm's USR1 (as before a time limit or a preemption): the workers save and stop, the job requeues itself and
    its next run starts after the saved step; cancelled there, `hpclaunch resume` goes on from the newest checkpoint
    too. One node, 2 workers; 3 starts of MindSpore (~20 s each on 2 idle cores), a few steps each."""
    job_id, run_dir = _submit(hpclaunch, "--nodes", "1", "--set", "train.max_steps=40", "--set", "train.log_every=1",
                              "--set", "train.micro_batch_size=2")
    assert _until_started(run_dir, 0, job_id) == 1
    subprocess.run(["scancel", "--signal=USR1", "--batch", job_id], check=True)
    deadline = Deadline(300, [job_id])
    while not _checkpoints(run_dir, "signal"):
        deadline.check(f"job {job_id} saved no checkpoint after USR1")
        time.sleep(0.5)
    (saved,) = _checkpoints(run_dir, "signal")
    # requeued by its own job script; started again by Slurm once the job's credential expired (the dev cluster's
    # cred_expire=10; `scontrol update StartTime=now` before that gets the start refused: "Job credential revoked")
    assert _until_started(run_dir, 1, job_id) == saved + 1  # the requeued run goes on after the saved step
    out = (run_dir / "logs" / f"job.{job_id}.out").read_text(errors="replace")
    assert "requeueing job" in out and f"stopped at step {saved} (signal)" in out
    assert f"resumed from {run_dir}/checkpoints/step-{saved:08d} at step {saved}" in out

    assert hpclaunch("cancel", job_id).exit_code == 0
    assert _wait(job_id).state == "CANCELLED"
    newest = max(int(p.name.removeprefix("step-")) for p in (run_dir / "checkpoints").glob("step-*"))
    resumed = hpclaunch("resume", job_id)
    assert resumed.exit_code == 0, resumed.output
    new_id = re.search(r" as job (\d+),", resumed.output)[1]
    assert f"from its checkpoint at step {newest} ({run_dir}/checkpoints/step-{newest:08d}), restart 2" in \
        resumed.output
    try:
        assert _until_started(run_dir, 2, new_id) == newest + 1
    finally:
        hpclaunch("cancel", new_id)
    assert _wait(new_id, timeout=120).state == "CANCELLED"
    steps = [rec["step"] for rec in read_json_lines(run_dir / "metrics" / "rank-0.jsonl") if "loss" in rec]
    assert steps[0] == 1 and all(b <= a + 1 for a, b in zip(steps, steps[1:], strict=False)), steps
