"""Recovery inside the allocation (docs/troubleshooting.md#recovery-inside-the-allocation): the fault list's
grammar, restarts.max and --spare-nodes as settings, the relaunch decision, a lost node named from the node
supervisors' records, and `nodefail` ending every process of a real supervised process tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.config.faults import Fault, parse_list
from hpclaunch.runtime.node import blame, relaunch
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission.resolve import CliOverrides, resolve

ALLOC = ("node1", "node2", "node3")


def test_a_fault_list_keeps_its_order_and_refuses_bad_items_and_repeats():
    assert parse_list("kill:1:20, hang:1:60,nodefail:0:100") == (
        Fault("kill", 1, 20), Fault("hang", 1, 60), Fault("nodefail", 0, 100))
    assert str(Fault("nodefail", 0, 100)) == "nodefail:0:100"
    for bad in ("kill:1:20,", "kill:1:20,boom:0:1", "kill:1:20;hang:1:3", "kill:1:20,kill:1:20"):
        with pytest.raises(ValueError, match="HPCLAUNCH_INJECT"):
            parse_list(bad)


def test_submit_refuses_a_bad_fault_list_before_anything_is_queued(hpclaunch, monkeypatch):
    monkeypatch.setenv("HPCLAUNCH_INJECT", "kill:1:20,explode:0:3")
    res = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run")
    assert res.exit_code == 2 and "'explode:0:3' is not KIND:RANK:STEP" in res.output, res.output
    assert "Traceback" not in res.output


def test_restarts_max_defaults_by_scheduler_and_follows_set(hpc_home):
    assert resolve("allreduce", "local").restarts.max == 0
    assert resolve("allreduce", "dev-slurm").restarts.max == 3
    spec = resolve("allreduce", "dev-slurm", CliOverrides(sets=("restarts.max=5",), spare_nodes=1, layout="2n1g"))
    assert (spec.restarts.max, spec.spare_nodes) == (5, 1)


def test_a_profile_sets_restarts_max_and_the_recipe_and_set_win(write_profile, write_recipe):
    profile = str(write_profile(restarts={"max": 1}))
    assert resolve(str(write_recipe()), profile).restarts.max == 1
    assert resolve(str(write_recipe(restarts={"max": 2})), profile).restarts.max == 2
    assert resolve(str(write_recipe(restarts={"max": 2})), profile,
                   CliOverrides(sets=("restarts.max=0",))).restarts.max == 0


def test_negative_restarts_and_spares_beyond_the_partition_exit_2_before_queueing(hpclaunch):
    res = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--set", "restarts.max=-1", "--dry-run")
    assert res.exit_code == 2 and "restarts.max" in res.output and "Traceback" not in res.output, res.output
    res = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--layout", "2n1g", "--spare-nodes", "3",
                    "--dry-run")
    assert res.exit_code == 2 and "allows at most 4" in res.output and "at most 2 spare" in res.output, res.output


def test_the_dry_run_asks_for_the_spares_and_launches_on_the_layouts_nodes(hpclaunch):
    res = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--layout", "2n1g", "--spare-nodes", "1",
                    "--set", "restarts.max=2", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "#SBATCH --nodes=3" in res.stdout and "--nodes=2 --nodelist=\"$HPCLAUNCH_NODELIST\"" in res.stdout
    assert "restarts.max=2" in res.stdout and "one of\n# the 1 spare node(s) takes its place" in res.stdout
    res = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--dry-run")
    assert "with no spare node the\n# job ends there" in res.stdout and "never shrunk" in res.stdout


def _found(cause: str, node: str = "node1") -> blame.Blame:
    return blame.Blame((node,), f"{cause} on {node}", cause, 0)


def test_relaunch_decision():
    args = dict(used=("node1", "node2"), allocation=ALLOC, dropped=(), relaunches=0, max_restarts=3)
    end = relaunch.decide(None, **args)
    assert end.action == "end" and "error in the script" in end.reason
    hang = relaunch.decide(_found("hang", "node2"), **args)
    assert (hang.action, hang.nodes, hang.dropped) == ("relaunch", ("node1", "node2"), ())
    lost = relaunch.decide(_found("node_lost"), **args)
    assert (lost.action, lost.nodes, lost.dropped) == ("relaunch", ("node2", "node3"), ("node1",))
    again = relaunch.decide(_found("device_fault", "node2"), **{**args, "used": lost.nodes, "dropped": lost.dropped})
    assert again.action == "end" and "no spare node left" in again.reason and again.dropped == ("node1", "node2")
    spent = relaunch.decide(_found("killed"), **{**args, "relaunches": 3})
    assert spent.action == "end" and "restarts.max=3" in spent.reason


def _node(run: RunFiles, node: int, host: str, **fields: object) -> None:
    path = run.node_record(node, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"node": str(node), "host": host, "restart": 0, "started": 1.0, **fields}))


def test_a_node_whose_supervisor_recorded_no_end_is_lost_and_named(tmp_path: Path):
    run = RunFiles(tmp_path)
    run.logs.mkdir()
    progress = run.progress_file(0, 0)
    progress.parent.mkdir()
    progress.write_text(json.dumps({"rank": 0, "step": 7, "phase": "forward", "t": 1.0, "host": "node1"}))
    _node(run, 0, "node1")
    _node(run, 1, "node2", signalled=5.0)  # told to stop, maybe SIGKILLed by Slurm before it recorded its end
    found = blame.blame(run, 0, 137)
    assert found is not None and (found.nodes, found.cause, found.rank) == (("node1",), "node_lost", 0)
    _node(run, 0, "node1", ended=6.0, code=1)
    assert blame.lost_nodes(run, 0) == []


def test_a_node_lost_before_it_published_its_ranks_is_named_with_them(tmp_path: Path):
    """Lost in its first seconds (its supervisor published no rank yet): a fixed world places ranks node by node,
    so node 1 of 2-rank nodes held ranks 2 and 3."""
    run = RunFiles(tmp_path)
    run.logs.mkdir()
    ranks = {str(r): {"rank": r, "step": 3, "phase": "forward", "t": 1.0, "host": "node1"} for r in (0, 1)}
    _node(run, 0, "node1", signalled=5.0, ranks=ranks)
    _node(run, 1, "node2")  # no ranks, no end: lost with everything on it
    found = blame.blame(run, 0, 137)
    assert found is not None and (found.nodes, found.cause, found.rank) == (("node2",), "node_lost", 2), found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_nodefail_kills_the_supervisor_its_tree_and_the_task_above_it(tmp_path: Path):
    env = {**os.environ, "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_NODE_RANK": "0", "HPCLAUNCH_JOB_ID": "t"}
    worker = ("import subprocess, sys, time; sleeper = subprocess.Popen(['sleep', '300']); "
              f"open({str(tmp_path / 'pids')!r}, 'w').write(str(sleeper.pid)); time.sleep(1.5); "
              "from hpclaunch.runtime.node.inject import node_fail; node_fail()")
    python = sys.executable
    supervise = f"{python} -m hpclaunch.runtime.node.supervise --no-watchdog -- {python} -c \"{worker}\""
    task = subprocess.Popen(["bash", "-c", f"{supervise}; echo survived"], env=env, stdout=subprocess.PIPE,
                            text=True)
    assert task.wait(timeout=60) == -9 and "survived" not in task.stdout.read()  # the task itself: SIGKILL
    sleeper = int((tmp_path / "pids").read_text())
    deadline = time.time() + 10
    while _alive(sleeper) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(sleeper)
    record = json.loads(RunFiles(tmp_path).node_record(0, 0).read_text())
    assert "ended" not in record and "signalled" not in record  # nothing on the node had a word to say


def test_a_recovery_is_read_back_with_the_seconds_to_the_first_step_after_it(tmp_path: Path):
    from hpclaunch.state import recoveries

    run = RunFiles(tmp_path)
    found = blame.Blame(("node1",), "node node1 lost", "node_lost", 0)
    decision = relaunch.decide(found, used=("node1", "node2"), allocation=ALLOC, dropped=(), relaunches=0,
                               max_restarts=3)
    detected = relaunch.record(run, 2, found, decision, "77")["detected_at"]
    assert recoveries.load(run)[0]["seconds_to_first_step"] is None  # no step finished after it yet
    run.timeline.write_text(json.dumps({"phase": "first_step", "restart": 3, "job": "77", "t": detected + 9.0}) + "\n")
    (rec,) = recoveries.load(run)
    assert {k: rec[k] for k in ("cause", "rank", "node", "resumed_step", "seconds_to_first_step", "nodes")} == {
        "cause": "node_lost", "rank": 0, "node": "node1", "resumed_step": 0, "seconds_to_first_step": 9.0,
        "nodes": "node2,node3"}
    assert recoveries.line(rec) == ("node_lost: rank 0 on node1, resumed from step 0 (checkpoint) on node2,node3, "
                                    "first step 9.0 s after")
