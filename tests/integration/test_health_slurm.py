"""Node health before step 0 and stragglers on the real dev Slurm cluster: a 2-node run whose nodes pass (the
result in the run directory and the timeline) and whose rank 1 is made a straggler (HPCLAUNCH_INJECT=slow:1:3,
named with its node by status and report); a threshold no node meets ends the job before step 0, naming the
nodes and the check."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.state.runfiles import RunFiles
from tests.integration.test_slurm_launch import (  # noqa: F401
    env,
    hpclaunch,
    needs_slurm,
    status_json,
    submit,
    wait_state,
)

pytestmark = [needs_slurm, pytest.mark.slurm, pytest.mark.slow]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
TINY = ("recipes/gpt2", "--profile", "dev-slurm", "--preset", "tiny", "--layout", "2n1g",
        "--set", "train.log_every=1", "--set", "train.eval_every=0", "--set", "train.save_every=0")


def _status(env: dict[str, str], job: str) -> dict:  # noqa: F811
    return status_json(env, job)


def _hosts(run_dir: Path, job: str) -> list[str]:
    """The job's nodes in order (node 0 of the allocation first), as Slurm's accounting has them (a job whose
    health check failed printed no launch line); asked again until accounting lists as many nodes as it counts."""
    hosts: list[str] = []
    for _ in range(60):  # sacct may not have (all) the nodes in the first seconds after the job started
        line = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "--format=NNodes,NodeList"], capture_output=True,
                              text=True).stdout.strip().splitlines()
        count, _, nodelist = (line[-1] if line else "").partition("|")
        if nodelist and nodelist != "None assigned":
            found = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True)
            hosts = found.stdout.split()
            if count.isdigit() and len(hosts) == int(count):
                break
        time.sleep(1)
    return hosts


def test_two_nodes_pass_health_and_a_slow_rank_is_named_with_its_node(env):  # noqa: F811
    sub = submit({**env, "HPCLAUNCH_INJECT": "slow:1:3"}, *TINY, "--set", "train.max_steps=20")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    deadline = time.time() + 600
    while time.time() < deadline and not _status(env, job)["stragglers"] and _status(env, job)["state"] not in ENDED:
        time.sleep(2)
    hosts = _hosts(run_dir, job)
    assert len(hosts) == 2, hosts
    named = hpclaunch(env, "status", job).stdout  # while it runs, or once it ended: the records stay
    assert f"straggler: rank 1 on {hosts[1]}: " in named, named
    seen = wait_state(env, job, ENDED, timeout=600)
    assert seen[-1] == "COMPLETED", seen

    verdict = json.loads((run_dir / "health" / "restart-0.json").read_text())
    assert verdict["ok"] is True and verdict["failed"] == []
    assert [n["host"] for n in verdict["nodes"]] == hosts
    for node in verdict["nodes"]:
        checks = {c["name"]: c for c in node["checks"]}
        assert checks["devices"]["ok"] is True and len(checks["devices"]["allocated"]) == 1  # --gres=gpu:1
        assert checks["free_space"]["ok"] is True and checks["free_space"]["free_gib"]["run root"] > 0
        assert checks["allreduce"]["ok"] is True and checks["allreduce"]["backend"] == "tcp"  # CPU: no torch import
        assert checks["allreduce"]["nodes"] == 2 and checks["allreduce"]["busbw_gbps"] > 0
        assert checks["allreduce"]["rounds"] == 1 and checks["allreduce"]["failed_partners"] == []
        assert (run_dir / "health" / f"node-{node['node']}.restart-0.json").is_file()
    status = _status(env, job)
    (entry,) = status["timeline"]
    assert "health_checked" in entry["phases"] and entry["durations"]["health"] > 0
    assert entry["phases"]["env_ready"] < entry["phases"]["health_checked"] < entry["phases"]["launched"]
    text = hpclaunch(env, "status", job).stdout
    assert "node health: 2 node(s) passed before step 0 (restart 0; links " in text
    assert ", health " in text  # the timeline's span
    (slow,) = status["stragglers"]
    assert (slow["rank"], slow["host"]) == (1, hosts[1]) and slow["ratio"] > 1.2
    report = hpclaunch(env, "report", job).stdout
    assert f"straggler: rank 1 on {hosts[1]}: " in report and "node health: 2 node(s) passed" in report


def test_a_threshold_no_node_meets_ends_the_job_before_step_0_naming_the_nodes_and_the_check(env):  # noqa: F811
    sub = submit(env, *TINY, "--set", "train.max_steps=5", "--set", "health.min_free_gib=1000000")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=300)
    assert seen[-1] == "FAILED", seen
    code, deadline = None, time.time() + 180
    while not code and time.time() < deadline:  # squeue may answer FAILED before accounting (busy) has the code
        code = _status(env, job)["exit_code"]
        time.sleep(0 if code else 1)
    assert str(code).split(":")[0] == "75", code  # sacct: 75:0
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    hosts = _hosts(run_dir, job)
    for node, host in enumerate(hosts):
        assert (f"hpclaunch: error: node {host} (node {node}) failed health check free_space: run root "
                in out), out[-3000:]
    assert "GiB free < health.min_free_gib 1e+06" in out
    assert f"node health check failed before step 0: the job ends (exit 75); failing nodes: {','.join(hosts)}" in out
    assert "launch exited with code 75" in out
    assert not list((run_dir / "logs").glob("rank-*.log")), "a rank started"
    assert not list(run_dir.glob("metrics/*")) and not RunFiles(run_dir).progress_records(0), "a rank started"
    assert (run_dir / "stop_reason").read_text().startswith(f"node health check failed before step 0: node {hosts[0]}")
    text = hpclaunch(env, "status", job).stdout
    assert "stopped by hpclaunch: node health check failed before step 0" in text
    assert f"node health: FAILED before step 0: {hosts[0]} (node 0) free_space: " in text
    failed = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.health", "--failed-nodes", "--run-dir",
                             str(run_dir)], capture_output=True, text=True, env=env, timeout=60)
    assert failed.stdout == ",".join(hosts) + "\n"
    (entry,) = _status(env, job)["timeline"]
    assert "health_checked" in entry["phases"] and "launched" not in entry["phases"]
    diagnosis = hpclaunch(env, "logs", job, "--diagnose", check=False).stdout
    assert "cause: hpclaunch stopped the job" in diagnosis and "failed health check free_space" in diagnosis


def test_a_node_failing_its_health_check_is_replaced_by_a_spare(env):  # noqa: F811
    """2 nodes + 1 spare, node 0 of the allocation made to fail (HPCLAUNCH_INJECT=sick:0:0): every node of the
    allocation is checked, the launch runs on the other two at the same world size, and the job completes."""
    sub = submit({**env, "HPCLAUNCH_INJECT": "sick:0:0"}, *TINY, "--set", "train.max_steps=6", "--spare-nodes", "1")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=600)
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert seen[-1] == "COMPLETED", (seen, out[-3000:])
    allocation = _hosts(run_dir, job)
    assert len(allocation) == 3, allocation
    verdict = json.loads((run_dir / "health" / "restart-0.json").read_text())
    assert [n["host"] for n in verdict["nodes"]] == allocation  # the spare was checked too
    assert verdict["failed_hosts"] == [allocation[0]] and verdict["launch_nodes"] == allocation[1:]
    assert f"{allocation[0]} failed; spare node(s) take their place: the launch runs on " \
           f"{','.join(allocation[1:])}" in out, out[-3000:]
    ranks = {RunFiles(run_dir).progress_records(0)[r]["host"] for r in (0, 1)}  # their nodes' records
    assert ranks == set(allocation[1:])
    assert not (run_dir / "stop_reason").exists()
