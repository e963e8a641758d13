"""Issue 23 items 2, 3 and 9 on the real dev cluster: a job with a short time limit saves on its own before its end
(no USR1: a 2-minute job gets none), in the background, and is recorded (checkpoints.jsonl: why "end", blocked and
write seconds); on a profile with `checkpoint: {requeue: false}` it chains a follow-on job
(--dependency=afterany) that resumes from that checkpoint and finishes, and `status` shows the chain.

The first job cannot finish: rank 0 is a straggler (HPCLAUNCH_INJECT=slow:0:1, 5x every step, first run only)
and has far more steps than fit in 2 minutes, so it either saves before the limit or is killed by it (the
failure this test looks for). The follow-on gets a longer limit from the test (scontrol update, as an operator
would) so that it surely finishes: its own end is not what is tested here."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml

from hpclaunch.state.runfiles import RunFiles, read_json_lines
from tests.integration.test_slurm_launch import (  # noqa: F401
    env,
    hpclaunch,
    needs_slurm,
    status_json,
    submit,
    wait_state,
)
from tests.integration.waiting import Deadline

REPO = Path(__file__).resolve().parents[2]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


def _no_requeue_profile(tmp_path: Path) -> Path:
    profile = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    profile["name"] = "dev-slurm-norequeue"
    profile["checkpoint"] = {"requeue": False}
    path = tmp_path / "dev-slurm-norequeue.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _follow_on(run_dir: Path, job: str, timeout: float) -> dict:
    deadline = Deadline(timeout, [job])  # its time queued for nodes not counted
    while True:
        for entry in read_json_lines(RunFiles(run_dir).retries):
            if entry.get("from") == job and entry.get("chain"):
                return entry
        deadline.check(f"no follow-on job of {job} in {RunFiles(run_dir).retries}")
        time.sleep(0.2)


def _latest_state(env: dict[str, str], job: str, timeout: float) -> dict:  # noqa: F811
    """`status JOB --json` once the newest job of JOB's chain has ended."""
    deadline = Deadline(timeout, [job])
    while True:
        answer = status_json(env, job)
        if (answer.get("latest") or {}).get("state") in ENDED:
            return answer
        if (answer.get("latest") or {}).get("job_id"):
            deadline.watch(answer["latest"]["job_id"])  # the follow-on's time queued for nodes not counted either
        deadline.check(f"the follow-on of job {job} did not end")
        time.sleep(1)


@needs_slurm
@pytest.mark.slurm
@pytest.mark.slow
def test_short_job_saves_before_its_end_and_chains_a_follow_on_that_finishes(env, tmp_path):  # noqa: F811
    """Over 30 s: the first job runs into its time limit (2 minutes, as short as Slurm's minutes allow while
    leaving time to save), then its follow-on runs."""
    profile = _no_requeue_profile(tmp_path)
    sub = submit({**env, "HPCLAUNCH_INJECT": "slow:0:1"}, "recipes/gpt2", "--profile", str(profile),
                 "--preset", "tiny", "--layout", "1n2g", "--time", "2", "--set", "train.max_steps=600",
                 "--set", "train.log_every=5", "--set", "train.save_every=0")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    script = (run_dir / "job.sbatch").read_text()
    assert "#SBATCH --no-requeue" in script and "#SBATCH --signal" not in script, script[:1500]

    chain = _follow_on(run_dir, job, timeout=400)
    nxt = chain["to"]
    subprocess.run(["scontrol", "update", f"JobId={nxt}", "TimeLimit=10"], check=True)
    assert wait_state(env, job, ENDED, timeout=120)[-1] == "COMPLETED"

    first = read_json_lines(RunFiles(run_dir).checkpoint_log)
    assert [r["why"] for r in first] == ["end"], first
    saved = first[0]
    assert saved["async"] and saved["blocked_s"] >= 0 and saved["write_s"] >= 0 and saved["bytes"] > 0, saved
    rank0 = (run_dir / "logs" / "rank-0.restart-0.log").read_text()
    assert "saving before the time limit" in rank0 and "before the time limit" in rank0, rank0[-2000:]
    assert f"follow-on job {nxt}" in (run_dir / "logs" / f"job.{job}.out").read_text()

    status = _latest_state(env, job, timeout=420)
    assert [r["to"] for r in status["retries"]] == [nxt], status["retries"]
    assert status["latest"]["state"] == "COMPLETED", status["latest"]
    shown = hpclaunch(env, "status", job).stdout
    assert f"{job} -> {nxt}" in shown and "follow-on" in shown, shown
    resumed = (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    assert f"at step {saved['step']}" in resumed and "resumed from" in resumed, resumed[-2000:]
    steps = [r["step"] for r in read_json_lines(RunFiles(run_dir).metrics_file(0)) if "loss" in r and
             "eval_loss" not in r]
    assert steps == sorted(set(steps)) and steps[-1] == 600, steps
    whys = [r["why"] for r in read_json_lines(RunFiles(run_dir).checkpoint_log)]
    assert whys == ["end", "final"], whys

    report = hpclaunch(env, "report", job).stdout
    assert f"checkpoint step {saved['step']} (end)" in report and "blocked" in report, report


@needs_slurm
@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeueing_job_saves_before_its_end_and_requeues_itself(env):  # noqa: F811
    """The default (requeue): a 1-minute job saves on its own before the limit and requeues itself; its next
    run resumes from that checkpoint (then the test cancels it: each run of a minute would save and requeue).
    Over 30 s: Slurm's shortest time limit (1 minute) must run out once.
    """
    sub = submit(env, "recipes/gpt2", "--profile", "dev-slurm", "--preset", "tiny", "--layout", "1n2g",
                 "--time", "1", "--set", "train.max_steps=100000", "--set", "train.log_every=5",
                 "--set", "train.save_every=0")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    second = run_dir / "logs" / "rank-0.restart-1.log"
    deadline = Deadline(300, [job])  # its time queued for nodes, before each run, not counted
    try:
        while not deadline.expired() and "resumed from" not in (second.read_text() if second.is_file() else ""):
            time.sleep(1)
    finally:
        subprocess.run(["scancel", job], check=False)
    first = read_json_lines(RunFiles(run_dir).checkpoint_log)
    assert first and first[0]["why"] == "end" and first[0]["restart"] == 0, first
    assert f"at step {first[0]['step']}" in second.read_text(), second.read_text()[-2000:]
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert f"saved before the time limit: requeueing job {job} (restart 0)" in out, out[-2000:]
