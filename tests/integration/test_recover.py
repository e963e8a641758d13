"""Recovery inside the allocation on the real dev Slurm cluster (docs/troubleshooting.md#recovery-inside-the-
allocation): GPT-2 tiny on 2 nodes with one spare node and three injected faults in sequence (a rank killed, a
rank hung, rank 0's node lost) completes as one Slurm job, each relaunch going on from the surviving data-parallel
peer's snapshot in node memory at the step the fault struck (0 steps recomputed; #recovery-from-a-peer), the
lost node replaced by the spare, and ends with the losses of an uninterrupted run; an exception in the script
(crash) is not relaunched."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hpclaunch.runtime.train import peerstore
from tests.integration.test_recipes_tiny import losses
from tests.integration.test_slurm_launch import env, hostnames, hpclaunch, needs_slurm, submit, wait_state  # noqa: F401

pytestmark = [needs_slurm, pytest.mark.slurm, pytest.mark.slow]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
RUN = ("recipes/gpt2", "--profile", "dev-slurm", "--preset", "tiny", "--layout", "2n1g",
       "--set", "train.log_every=1", "--set", "train.eval_every=0", "--set", "train.max_steps=20",
       "--set", "train.save_every=4", "--set", "watchdog.timeout=45")  # 45: a step of a rank starved of CPU (the
# suite's other workers, a busy machine) is no hang; the injected hang is caught 45 s after it
FAULTS = "kill:1:6,hang:1:14,nodefail:0:17"


def _sacct(job: str) -> list[list[str]]:
    out = subprocess.run(["sacct", "-n", "-P", "-j", job, "--format=JobID,State,NodeList"], capture_output=True,
                         text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]


def test_three_faults_recover_inside_one_job_with_a_spare_and_the_uninterrupted_losses(env):  # noqa: F811
    """Over 30 s: three relaunches inside the job (the hang is found by the watchdog, 45 s after it) and an
    uninterrupted reference run."""
    faulty = submit({**env, "HPCLAUNCH_INJECT": FAULTS}, *RUN, "--spare-nodes", "1")
    reference = submit(env, *RUN)
    job, run_dir = faulty["job_id"], Path(faulty["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=600)
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert seen[-1] == "COMPLETED", (seen, out[-4000:])
    rows = _sacct(job)
    assert {row[0].split(".")[0] for row in rows} == {job} and rows[0][1] == "COMPLETED", rows
    assert len(hostnames(rows[0][2])) == 3  # two nodes and the spare
    assert not (run_dir / "retries.jsonl").exists()  # nothing went back to the queue
    fired = {json.loads(line)["fault"]: json.loads(line) for line in
             (run_dir / "progress" / "injected.jsonl").read_text().splitlines()}
    assert sorted(fired) == sorted(FAULTS.split(","))
    status = json.loads(hpclaunch(env, "status", job, "--json").stdout)
    rec = status["recoveries"]
    assert [(r["cause"], r["rank"]) for r in rec] == [("killed", 1), ("hang", 1), ("node_lost", 0)], rec
    lost = fired["nodefail:0:17"]["host"]
    assert rec[0]["node"] == fired["kill:1:6"]["host"] and rec[2]["node"] == lost
    # each relaunch goes on from a surviving peer's snapshot of the step the fault struck after (the checkpoints,
    # every 4 steps, would have been 4, 12 and 16): nothing is trained twice; the lost node's replacement and the
    # killed rank's process got the state over the collective
    saved = [json.loads(line)["step"] for line in (run_dir / "checkpoints.jsonl").read_text().splitlines()]
    for r, fault in zip(rec, FAULTS.split(","), strict=True):
        struck = fired[fault]
        assert (r["source"], r["resumed_step"], r["recomputed_steps"]) == ("peer", struck["step"], 0), (r, struck)
        assert r["checkpoint_step"] < r["resumed_step"] and r["resumed_step"] not in saved, (r, saved)
    assert status["goodput"]["recomputed_steps"] == 0, status["goodput"]
    assert all(r["seconds_to_first_step"] is not None and r["detected_at"] > 0 for r in rec), rec
    assert lost not in rec[2]["nodes"].split(",") and len(rec[2]["nodes"].split(",")) == 2
    steps = [row for row in rows if row[0].startswith(f"{job}.") and row[0][len(job) + 1:].isdigit()]
    assert len(steps) == 1 + 4, rows  # the node health check (every node), then the launch and three relaunches
    assert len(hostnames(steps[0][2])) == 3 and lost not in hostnames(steps[-1][2]), rows  # the spare ran the last
    human = hpclaunch(env, "status", job).stdout
    assert f"recovery 3: node_lost: rank 0 on {lost}, resumed from step {rec[2]['resumed_step']} (peer)" in human, human
    left = peerstore.job_folder(job, run_dir)  # node memory: the last launch's nodes gave theirs back at the end
    assert sorted(p.name for p in left.glob("*")) in ([], [fired["nodefail:0:17"]["host"]]), list(left.glob("*"))
    shutil.rmtree(left, ignore_errors=True)  # the lost node's (the dev cluster's nodes share one /dev/shm)

    assert wait_state(env, reference["job_id"], ENDED, timeout=600)[-1] == "COMPLETED"
    got, want = losses(run_dir), losses(Path(reference["run_dir"]))
    assert sorted(got) == sorted(want) == list(range(1, 21))
    for step in want:  # steps run twice keep the relaunch's loss (written last): the uninterrupted one
        assert abs(got[step] - want[step]) < 1e-5, (step, got[step], want[step])


def test_a_crash_in_the_script_is_not_relaunched(env):  # noqa: F811
    sub = submit({**env, "HPCLAUNCH_INJECT": "crash:1:3"}, *RUN, "--set", "restarts.max=3")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    assert wait_state(env, job, ENDED, timeout=600)[-1] == "FAILED"
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert "not relaunched: not a cause a restart can fix" in out, out[-3000:]
    assert not (run_dir / "recoveries.jsonl").exists()
    # the snapshots the 2 data-parallel ranks kept in node memory before the crash are given back at the job's end
    # (the ranks' own clean-up runs only when training ends or stops with a checkpoint)
    left = peerstore.job_folder(job, run_dir)
    assert f": gave back the snapshots in node memory ({left})" in out, out[-3000:]
    assert not left.exists()
    assert [row[0] for row in _sacct(job) if row[0].startswith(f"{job}.") and row[0][len(job) + 1:].isdigit()] == \
        [f"{job}.0", f"{job}.1", f"{job}.2"]  # the node health check, one launch only, the clean-up of node memory
