"""Failure handling on the real dev Slurm cluster, driven by hpclaunch's own fault injection
(HPCLAUNCH_INJECT=KIND:RANK:STEP in the submitting environment): a hung rank ends the whole job through
the node supervisor's watchdog and is named by --diagnose; a crashed or killed rank ends the job fast; a
job requeued again and again without a new checkpoint stops; --retries resubmits after a node-level
failure without the blamed node and resumes from the checkpoint. Each through Slurm's commands (dev-slurm) and
through slurmrestd (dev-slurm-rest), but for the hang, the killed rank and the requeues: what sets those apart
happens inside the job (the node supervisor's watchdog; SIGKILL's exit record; the restart count), so they run
through dev-slurm only. A REST job's own part there is checked elsewhere: a rank that fails ends it FAILED and is
diagnosed (the crashed rank through dev-slurm-rest, below), and it requeues and runs again
(tests/integration/test_requeue.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from hpclaunch.state.runfiles import RunFiles
from tests.integration.backends import Backend
from tests.integration.test_slurm_launch import (  # noqa: F401
    env,
    hpclaunch,
    job_hosts,
    needs_slurm,
    submit,
    wait_state,
)
from tests.integration.waiting import Deadline, start_now

pytestmark = [needs_slurm, pytest.mark.slurm, pytest.mark.slow]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
# restarts.max=0: these rehearse how a failure ends the job (tests/integration/test_recover.py: the relaunch)
TINY = ("recipes/gpt2", "--preset", "tiny", "--layout", "2n1g", "--set", "train.log_every=1", "--set",
        "train.eval_every=0", "--set", "restarts.max=0")


def _record(run_dir: Path, rank: int, restart: int = 0) -> dict:
    """A rank's last progress record, as its node's supervisor published it (what status reads)."""
    return RunFiles(run_dir).progress_record(rank, restart) or {}


def _ended_at(job: str) -> float:
    """When Slurm says the job ended (sacct End), as epoch seconds."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "--format=End"], capture_output=True, text=True)
    end = out.stdout.strip().splitlines()[0]
    return time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S"))


def _diagnose(env: dict[str, str], job: str) -> dict:  # noqa: F811
    return json.loads(hpclaunch(env, "logs", job, "--diagnose", "--json", check=False).stdout)


def _submit_injected(env: dict[str, str], backend: Backend, inject: str, *extra: str) -> tuple[str, Path]:  # noqa: F811
    sub = submit({**env, "HPCLAUNCH_INJECT": inject}, *TINY, *backend.args, *extra)
    return sub["job_id"], Path(sub["run_dir"])


@pytest.mark.parametrize("backend", ["dev-slurm"], indirect=True)  # in-job: see the module's docstring
def test_a_hung_rank_ends_the_whole_job_within_three_minutes_and_is_named(env, backend):  # noqa: F811
    """Over 30 s: the watchdog's timeout (60 s: its floor for an adaptive timeout) must pass after the hang."""
    env = backend.env(env)
    job, run_dir = _submit_injected(env, backend, "hang:1:5", "--set", "train.max_steps=400",
                                    "--set", "watchdog.timeout=60")
    seen = wait_state(env, job, ENDED, timeout=600)
    assert seen[-1] == "FAILED", seen
    hung = _record(run_dir, 1)
    assert (hung["step"], hung["phase"]) == (5, "data"), hung
    assert _ended_at(job) - hung["t"] < 180, "the job outlived the hang by more than 3 minutes"
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert "watchdog: no rank progressed" in out and "launch exited with code 124" in out, out[-3000:]
    d = _diagnose(env, job)
    assert d["cause"] == "hung" and d["rank"] == 1 and d["waiting_ranks"] == [0], d
    assert d["title"].startswith("rank 1 hung after step 5 (phase: data); rank 0 waited in a collective"), d
    assert d["node"] == job_hosts(job)[1]
    left = subprocess.run(["pgrep", "-f", f"{run_dir}/recipe/train.py"], capture_output=True, text=True)
    assert not left.stdout.strip(), f"ranks still running after the job ended: {left.stdout}"


# a killed rank through dev-slurm only: what sets it apart from a crash (SIGKILL, its exit record) is in-job
@pytest.mark.parametrize(("kind", "backend"),
                         [("crash", "dev-slurm"), ("kill", "dev-slurm"), ("crash", "dev-slurm-rest")],
                         indirect=["backend"])
def test_a_crashed_or_killed_rank_ends_the_job_within_90_seconds_and_is_named(env, kind, backend):  # noqa: F811
    env = backend.env(env)
    job, run_dir = _submit_injected(env, backend, f"{kind}:1:3", "--set", "train.max_steps=400")
    seen = wait_state(env, job, ENDED, timeout=600)
    assert seen[-1] == "FAILED", seen
    failed_at = _record(run_dir, 1)["t"]
    assert _ended_at(job) - failed_at < 90
    d = _diagnose(env, job)
    assert d["rank"] == 1, d
    if kind == "crash":
        assert "InjectedCrashError" in (d["error"] or ""), d
    else:
        assert d["cause"] == "host_oom", d  # SIGKILL, as the OOM killer sends it
        exit_record = json.loads((run_dir / "progress" / "rank-1.restart-0.exit").read_text())
        kept = {k: exit_record[k] for k in ("rank", "code", "host")}
        assert kept == {"rank": 1, "code": -9, "host": job_hosts(job)[1]}
        assert d["first_failure"]["rank"] == "1"  # without torchrun's agent: the earliest recorded exit


@pytest.mark.parametrize("backend", ["dev-slurm"], indirect=True)  # in-job: see the module's docstring
def test_a_job_requeued_three_times_without_a_new_checkpoint_stops(env, backend):  # noqa: F811
    """Over 30 s: four runs of one job (three requeues), each a torch start-up."""
    env = backend.env(env)
    sub = submit(env, "allreduce", *backend.args, "--preset", "slow", "--layout", "1n1g")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    out = run_dir / "logs" / f"job.{job}.out"
    for restart in range(3):
        deadline = Deadline(240, [job])
        while f"restart {restart} on" not in (out.read_text() if out.exists() else ""):
            deadline.check(f"restart {restart} did not start")
            time.sleep(1)
        subprocess.run(["scontrol", "requeue", job], check=True)
        start_now(job)
    seen = wait_state(env, job, ENDED, timeout=300)
    assert seen[-1] == "FAILED", seen
    reason = (run_dir / "stop_reason").read_text()
    assert "requeued 3 times in a row without a new checkpoint" in reason
    status = hpclaunch(env, "status", job).stdout
    assert "stopped by hpclaunch: requeued 3 times in a row without a new checkpoint" in status, status
    assert "restart 3 on" not in out.read_text().split("not running again")[0][-400:]


def test_retries_resubmit_without_the_blamed_node_and_resume_from_the_checkpoint(env, backend):  # noqa: F811
    env = backend.env(env)
    job, run_dir = _submit_injected(env, backend, "kill:1:8", "--set", "train.max_steps=14",
                                    "--set", "train.save_every=5", "--retries", "1")
    seen = wait_state(env, job, ENDED, timeout=600)
    assert seen[-1] == "FAILED", seen
    deadline = time.time() + 60
    while time.time() < deadline and not (run_dir / "retries.jsonl").is_file():
        time.sleep(1)
    chain = [json.loads(line) for line in (run_dir / "retries.jsonl").read_text().splitlines()]
    blamed = job_hosts(job)[1]  # rank 1's node
    assert len(chain) == 1 and chain[0]["from"] == job and chain[0]["exclude"] == blamed, chain
    assert "SIGKILL" in chain[0]["reason"]
    retry = chain[0]["to"]
    seen = wait_state(env, retry, ENDED, timeout=600)
    assert seen[-1] == "COMPLETED", (seen, (run_dir / "logs" / f"job.{retry}.out").read_text()[-3000:])
    assert blamed not in job_hosts(retry)
    resumed = (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    assert "resumed from" in resumed and "step-00000005" in resumed, resumed[-2000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()
             if '"loss"' in line and "eval_loss" not in line]
    assert steps[-1] == 14
    status = hpclaunch(env, "status", job).stdout
    assert f"retry 1: {job} -> {retry} (COMPLETED)" in status and f"excluded {blamed}" in status, status
    # a rehearsal: the retry left the node out, but no later job avoids it (the fault was made, the node is healthy)
    remembered = Path(env["HPCLAUNCH_HOME"]) / "suspect-nodes.json"
    assert not remembered.exists() or blamed not in json.loads(remembered.read_text())
    assert f"{blamed} not remembered as suspect: a rehearsal" in (run_dir / "logs" / f"job.{job}.out").read_text()
