"""Slow nodes swapped for a spare (docs/troubleshooting.md#stragglers): the ranks' windows of steps in their progress
records, node 0's judge over them, its finding and the USR1 a real supervisor sends its ranks, the blame and the
relaunch decision that follow, and the words status and report show. The dev-cluster test is
tests/integration/test_slow_swap.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpclaunch.runtime.node import blame, progress, relaunch, slowswap
from hpclaunch.state import slownodes, suspects
from hpclaunch.state.runfiles import RunFiles

# seconds and waiting over a window of 10 steps: all ranks alike; or one slow (0.5 s a step of its own, waiting for
# none) and the others waiting 0.4 s a step of it for that one
FAST, SLOW, WAITED = [1.0, 0.8], [5.0, 0.0], [5.0, 4.0]


def _rec(host: str, windows: dict[int, list[float]], step: int = 40) -> dict[str, object]:
    return {"host": host, "step": step, "phase": "forward", "t": 1.0,
            "hw": [[i, *w] for i, w in sorted(windows.items())]}


def _job(slow_in: set[int], *, windows: range = range(1, 4)) -> dict[int, dict[str, object]]:
    """Four ranks on two nodes, rank 2 on nodeB slow in the windows `slow_in`."""
    return {rank: _rec("nodeA" if rank < 2 else "nodeB",
                       {i: (SLOW if rank == 2 else WAITED) if i in slow_in else FAST for i in windows})
            for rank in range(4)}


def test_the_writer_keeps_whole_windows_of_the_same_steps_on_every_rank(monkeypatch: pytest.MonkeyPatch):
    """Steps 1 s apart on a hand-moved clock: step 1 only starts the count; windows of 2 steps are indexed by
    (step - 1) // 2, an unfinished one is not kept, and only the last 2 + SLACK_WINDOWS whole windows are."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    monkeypatch.setattr(progress, "SLACK_WINDOWS", 0)
    p = progress.Progress(None, 0, window=2, windows=2)
    for step in range(1, 9):
        p.enter("data", step - 1)
        now[0] += 0.25
        p.enter("forward", step - 1)
        now[0] += 0.75
        p.enter("optimizer", step)
    assert [w[0] for w in p.whole] == [2, 3]  # steps 5-6 and 7-8; 1-2 lost its first step, 3-4 is older
    assert p.whole[-1] == [3, 2.0, 1.5]  # 2 s, 0.75 s a step waiting in forward
    assert progress.Progress(None, 0, windows=0).whole.maxlen == 0
    monkeypatch.undo()
    assert progress.Progress(None, 0, windows=5).whole.maxlen == 5 + progress.SLACK_WINDOWS


def test_the_judge_keeps_what_it_read_before_from_records_published_apart(tmp_path: Path):
    """The soak's case (benchmarks/soak.py, 2026-11-29): node 0 read its own rank's windows fresh and the slow node's
    record published seconds apart, so one read held windows 1395-1399 of one rank and 1396-1400 of the other: never
    5 windows every rank had finished, and the slow node went unswapped for 500 steps. The judge now keeps the
    windows of earlier reads."""
    watch = slowswap.SlowWatch(RunFiles(tmp_path), 0, windows=3, width=10, factor=1.2, budget=(1, 1, 1))
    job = _job({1, 2, 3, 4}, windows=range(1, 5))
    behind = {r: {**rec, "hw": [w for w in rec["hw"] if w[0] <= 2]} if r == 0 else rec for r, rec in job.items()}
    ahead = {r: {**rec, "hw": [w for w in rec["hw"] if w[0] >= 3]} if r == 0 else rec for r, rec in job.items()}
    assert slowswap.judge(behind, windows=3, width=10, factor=1.2) is None  # on one read: 2 windows in common
    assert watch.check(behind, 1.0) is None
    found = watch.check(ahead, 2.0)  # rank 0's windows 3-4 now, 1-2 remembered
    assert found is not None and found["host"] == "nodeB" and found["action"] == "swap"


def test_a_node_slow_in_every_one_of_the_last_windows_is_found_with_its_ratio():
    found = slowswap.judge(_job({1, 2, 3}), windows=3, width=10, factor=1.2)
    assert found is not None
    assert (found.host, found.rank, found.windows, found.first_step, found.step) == ("nodeB", 2, 3, 11, 40)
    # own step times 0.1 (waiting 0.4 above the least) x3 and 0.5: the median 0.1, rank 2 5x
    assert found.ratio == pytest.approx(5.0)
    assert found.text() == "nodeB slow for 3 windows (5.0x the median)"


@pytest.mark.parametrize("slow_in, windows", [({1, 3}, range(1, 4)), ({1, 2}, range(1, 4)), ({2, 3}, range(2, 4))])
def test_a_node_fast_in_one_window_or_not_watched_for_enough_windows_is_not_found(slow_in, windows):
    assert slowswap.judge(_job(slow_in, windows=windows), windows=3, width=10, factor=1.2) is None


def test_windows_some_rank_has_not_finished_do_not_count_nor_do_gaps():
    records = _job({1, 2, 3, 4}, windows=range(1, 5))
    records[0]["hw"] = records[0]["hw"][:-1]  # rank 0 has not finished window 4: windows 1-3 are judged
    assert slowswap.judge(records, windows=3, width=10, factor=1.2) is not None
    gap = _job({1, 2, 4}, windows=range(1, 5))
    for rec in gap.values():
        rec["hw"] = [w for w in rec["hw"] if w[0] != 3]
    assert slowswap.judge(gap, windows=3, width=10, factor=1.2) is None


def _watch(tmp_path: Path, budget: tuple[int, int, int]) -> slowswap.SlowWatch:
    return slowswap.SlowWatch(RunFiles(tmp_path), 0, windows=3, width=10, factor=1.2, budget=budget)


def test_the_finding_asks_a_swap_only_with_a_spare_free_and_a_swap_and_a_relaunch_left(tmp_path: Path):
    run = RunFiles(tmp_path)
    watch = _watch(tmp_path, (1, 1, 3))
    assert watch.check(_job({2, 3}), 5.0) is None  # slow in 2 windows only
    found = watch.check(_job({1, 2, 3}), 10.0)
    assert found is not None and found["action"] == "swap" and found["decided_at"] == 10.0
    assert json.loads(run.slow_verdict(0).read_text())["host"] == "nodeB"
    assert '"action": "swap"' in run.slow_verdict(0).read_text()  # what the job script greps for
    assert watch.check(_job({1, 2, 3}), 20.0) is None  # once per launch
    for budget, why in [((0, 1, 3), "no spare node free (submit --spare-nodes K"), ((1, 0, 3), "stragglers.max_swaps"),
                        ((1, 1, 0), "restarts.max")]:
        found = _watch(tmp_path / str(budget), budget).check(_job({1, 2, 3}), 1.0)
        assert found is not None and found["action"] == "report" and why in found["text"], found
    assert slowswap.budget({"HPCLAUNCH_SWAP_BUDGET": "1,0,2"}) == (1, 0, 2)
    assert slowswap.budget({}) == (0, 0, 0)


def test_judge_from_env_on_node_0_only_and_off_with_zero_windows(tmp_path: Path):
    env = {"HPCLAUNCH_STRAGGLER_WINDOWS": "2", "HPCLAUNCH_STRAGGLER_WINDOW": "3", "HPCLAUNCH_STRAGGLER_FACTOR": "1.5",
           "HPCLAUNCH_SWAP_BUDGET": "1,1,3"}
    watch = slowswap.SlowWatch.from_env(RunFiles(tmp_path), 0, "0", env)
    assert watch is not None and (watch.windows, watch.width, watch.factor, watch.budget) == (2, 3, 1.5, (1, 1, 3))
    assert slowswap.SlowWatch.from_env(RunFiles(tmp_path), 0, "1", env) is None
    assert slowswap.SlowWatch.from_env(RunFiles(tmp_path), 0, "0", {**env, "HPCLAUNCH_STRAGGLER_WINDOWS": "0"}) is None


def _saved(run: RunFiles, why: str, step: int = 40, restart: int = 0) -> None:
    with run.checkpoint_log.open("a") as out:
        out.write(json.dumps({"step": step, "why": why, "restart": restart}) + "\n")
    (run.checkpoints / f"step-{step}").mkdir(parents=True, exist_ok=True)
    run.progress.mkdir(exist_ok=True)  # made by the job script


def test_a_launch_that_ended_0_is_blamed_on_the_slow_node_only_when_the_ranks_saved_for_the_swap(tmp_path: Path):
    run = RunFiles(tmp_path)
    assert blame.blame(run, 0, 0) is None  # a launch that finished
    _watch(tmp_path, (1, 1, 3)).check(_job({1, 2, 3}), 10.0)
    _saved(run, "final")
    assert blame.blame(run, 0, 0) is None  # the ranks finished before they got the signal
    _saved(run, "signal", 41)
    found = blame.blame(run, 0, 0)
    assert found == blame.Blame(("nodeB",), "nodeB slow for 3 windows (5.0x the median)", "slow", 2)
    d = relaunch.decide(found, used=("nodeA", "nodeB"), allocation=("nodeA", "nodeB", "nodeC"), dropped=(),
                        relaunches=0, max_restarts=3)
    assert (d.action, d.nodes, d.dropped) == ("relaunch", ("nodeA", "nodeC"), ("nodeB",))
    reported = RunFiles(tmp_path / "report")
    _watch(reported.root, (0, 1, 3)).check(_job({1, 2, 3}), 10.0)
    _saved(reported, "signal")
    assert blame.blame(reported, 0, 0) is None  # only reported: nothing stopped for it


def _relaunch(tmp_path: Path, hpc_home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpclaunch.runtime.node.relaunch", "--exit-code", "0", "--max", "3"],
        env={**os.environ, "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_RESTART": "0", "HPCLAUNCH_JOB_ID": "77",
             "HPCLAUNCH_NODELIST": "nodeA,nodeB", "HPCLAUNCH_ALLOCATION": "nodeA,nodeB,nodeC",
             "HPCLAUNCH_HOME": str(hpc_home), "HPCLAUNCH_SCHEDULER": "slurm",
             "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **env},
        capture_output=True, text=True, check=True)


def test_the_swap_is_a_recovery_that_status_and_report_put_in_words(tmp_path: Path, hpc_home: Path):
    run = RunFiles(tmp_path)
    _watch(tmp_path, (1, 1, 3)).check(_job({1, 2, 3}), 10.0)
    _saved(run, "signal", 41)
    out = _relaunch(tmp_path, hpc_home, HPCLAUNCH_INJECT="slow:2:5").stdout
    assert "hpclaunch_action=relaunch" in out and "hpclaunch_nodes=nodeA,nodeC" in out, out
    assert "hpclaunch_cause=slow" in out
    (rec,) = [json.loads(line) for line in run.recoveries.read_text().splitlines()]
    assert (rec["cause"], rec["node"], rec["rank"], rec["resumed_step"], rec["detected_at"]) == (
        "slow", "nodeB", 2, 41, 10.0)
    text = "nodeB slow for 3 windows (5.0x the median): swapped at step 41 for nodeC"
    assert rec["reason"] == text
    (shown,) = slownodes.load(run)
    assert shown["swapped"] and slownodes.line(shown) == text and shown["ratio"] == 5.0
    assert suspects.load() == {}  # a rehearsal's slowness never marks the node for later jobs


def test_a_real_slow_node_is_a_suspect_and_one_only_reported_says_why(tmp_path: Path, hpc_home: Path):
    run = RunFiles(tmp_path)
    _watch(tmp_path, (1, 1, 3)).check(_job({1, 2, 3}), 10.0)
    _saved(run, "signal", 41)
    _relaunch(tmp_path, hpc_home, HPCLAUNCH_INJECT="")
    assert "slow for 3 windows" in suspects.load()["nodeB"]["reason"]
    other = RunFiles(tmp_path / "other")
    _watch(other.root, (0, 1, 3)).check(_job({1, 2, 3}), 10.0)
    (shown,) = slownodes.load(other)
    assert not shown["swapped"] and shown["action"] == "report"
    assert slownodes.line(shown) == ("nodeB slow for 3 windows (5.0x the median): not swapped: no spare node free "
                                     "(submit --spare-nodes K gives the allocation spares)")


_RANK = textwrap.dedent("""
    import json, os, signal, sys, time
    from pathlib import Path
    got = []
    signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
    run = Path(os.environ["HPCLAUNCH_RUN_DIR"]) / "progress"
    run.mkdir(parents=True, exist_ok=True)
    # the job's other node, as its supervisor publishes it: written once this rank listens for USR1
    fast, slow = [5.0, 4.0], [5.0, 0.0]
    ranks = {str(r): {"rank": r, "host": "nodeB" if r else "nodeA", "step": 30, "phase": "forward", "t": time.time(),
                      "hw": [[i, *(slow if r else fast)] for i in (1, 2)]} for r in (0, 1)}
    (run / "node-1.restart-0.json").write_text(json.dumps({"node": "1", "host": "nodeB", "ranks": ranks}))
    deadline = time.time() + 60
    while not got and time.time() < deadline:
        time.sleep(0.05)
    Path(os.environ["HPCLAUNCH_RUN_DIR"], "stopped-for-usr1").write_text("yes" if got else "no")
""")


def test_node_0s_supervisor_finds_the_slow_node_in_the_node_records_and_signals_its_ranks(tmp_path: Path):
    env = {**os.environ, "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_RESTART": "0", "HPCLAUNCH_NODE_RANK": "0",
           "HPCLAUNCH_JOB_ID": f"unit{os.getpid()}", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "HPCLAUNCH_STRAGGLER_WINDOWS": "2", "HPCLAUNCH_SWAP_BUDGET": "1,1,3"}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--poll=0.2", "--",
                           sys.executable, "-c", _RANK], env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "stopped-for-usr1").read_text() == "yes"
    found = json.loads(RunFiles(tmp_path).slow_verdict(0).read_text())
    assert (found["host"], found["rank"], found["action"], found["windows"]) == ("nodeB", 1, "swap", 2), found
    # own step times 0.1 and 0.5 s: with two ranks the median is their mean, 0.3 s
    assert "node 0: nodeB slow for 2 windows (1.7x the median): swapping it at the next log step" in proc.stderr


def test_bad_straggler_windows_and_swaps_in_a_profile_are_clear_errors(hpclaunch, write_profile):
    for key, value in (("windows", -1), ("max_swaps", 101), ("windows", "five")):
        res = hpclaunch("submit", "allreduce", "--profile", str(write_profile(stragglers={key: value})), "--dry-run")
        assert res.exit_code == 2 and f"stragglers.{key}" in res.output and "Traceback" not in res.output, res.output
