"""Stragglers from the per-rank progress records (hpclaunch/state/stragglers.py): records written into a run
directory as the ranks write them, the writer's step window (hpclaunch/runtime/node/progress.py), and the
lines `status`, `watch` and `report` show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.jobs.watch import Row, plain_lines
from hpclaunch.runtime.node import progress
from hpclaunch.state import stragglers
from hpclaunch.state.runfiles import RunFiles


def _record(run: RunFiles, rank: int, win: list[float], *, host: str = "node1", restart: int = 0,
            step: int = 40, sf: float | None = 1.2) -> None:
    path = run.progress_file(rank, restart)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = {"rank": rank, "step": step, "phase": "forward", "t": 1.0, "host": host, "pid": 10 + rank, "win": win,
           "sf": sf}
    path.write_bytes(json.dumps(rec).encode().ljust(progress.RECORD_BYTES))


def test_the_rank_the_others_wait_for_is_named_with_its_host(tmp_path: Path):
    """Four ranks, 10 steps of 0.5 s each: ranks 0, 1, 3 wait 0.38 s a step for rank 2, which waits 0.02 s."""
    run = RunFiles(tmp_path)
    for rank in (0, 1, 3):
        _record(run, rank, [10, 5.0, 3.8], host="node1" if rank < 2 else "node2")
    _record(run, 2, [10, 5.0, 0.2], host="node2")
    (found,) = stragglers.find(run, 1.2)
    assert (found["rank"], found["host"], found["steps"]) == (2, "node2", 10)
    assert found["step_s"] == pytest.approx(0.5) and found["median_s"] == pytest.approx(0.14)
    assert found["ratio"] == pytest.approx(3.57, abs=0.01)
    assert stragglers.describe(found) == "rank 2 on node2: 0.5 s/step, 3.57x the median 0.14 s (last 10 steps)"


def test_ranks_that_wait_alike_have_no_straggler_and_the_factor_is_a_setting(tmp_path: Path):
    run = RunFiles(tmp_path)
    _record(run, 0, [10, 5.0, 2.0])
    _record(run, 1, [10, 5.0, 1.5])  # own 0.35 vs 0.30 s a step: 1.08x the median (0.325)
    assert stragglers.find(run, 1.2) == [] and stragglers.find(run) == []
    (found,) = stragglers.find(run, 1.05)
    assert found["rank"] == 1
    _record(run, 0, [10, 5.0, 2.0], sf=1.05)  # the job's stragglers.factor, as its ranks write it
    _record(run, 1, [10, 5.0, 1.5], sf=1.05)
    assert [f["rank"] for f in stragglers.find(run)] == [1]


def test_milliseconds_of_own_time_in_a_step_of_waiting_are_noise(tmp_path: Path):
    """Two ranks that wait nearly the whole 36 ms step (as on one CPU node): 0.3 vs 0.1 ms of their own is 1.5x
    the median but 0.6 % of the step."""
    run = RunFiles(tmp_path)
    _record(run, 0, [10, 0.360, 0.359])
    _record(run, 1, [10, 0.362, 0.359])
    assert stragglers.find(run, 1.2) == []


def test_the_newest_restart_counts_and_short_windows_say_nothing(tmp_path: Path):
    run = RunFiles(tmp_path)
    _record(run, 0, [10, 5.0, 3.8], restart=0)
    _record(run, 1, [10, 5.0, 0.2], restart=0)
    assert [f["rank"] for f in stragglers.find(run)] == [1]
    _record(run, 0, [2, 1.0, 0.8], restart=1)  # after a restart: 2 steps, too few yet
    _record(run, 1, [2, 1.0, 0.1], restart=1)
    assert stragglers.find(run) == []
    assert stragglers.find(RunFiles(tmp_path / "none")) == []


def test_the_writer_sums_each_finished_step_and_its_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The loop's calls for three steps, on a clock that moves by hand: the first finished step only starts the
    count; then each step is 1.0 s, 0.6 s of it in forward (waiting for the peers), 0.3 s in data."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    p = progress.Progress(None, 0, window=2)

    def step(n: int, data: float, forward: float, optimizer: float) -> None:
        p.enter("data", n - 1)
        now[0] += data
        p.enter("forward")
        now[0] += forward
        p.enter("optimizer")
        now[0] += optimizer
        p.enter("optimizer", n)

    step(1, 2.0, 3.0, 0.5)  # warm-up: not counted
    assert p.window() == [0, 0, 0]
    step(2, 0.3, 0.6, 0.1)
    step(3, 0.3, 0.6, 0.1)
    step(4, 0.3, 0.6, 0.1)
    assert p.window() == [2, pytest.approx(2.0), pytest.approx(1.4)]  # forward + optimizer are waiting phases


def test_watch_lines_name_the_straggler():
    row = Row(job="77", state="RUNNING", step=40, max_steps=100, stragglers="rank1@node2 3.1x")
    assert row.cells()[1] == "RUNNING straggler rank1@node2 3.1x"
    (line,) = plain_lines([row], "12:00:00")
    assert line.endswith("straggler rank1@node2:3.1x")


def test_a_rank_without_progress_is_flagged_before_the_watchdog_ends_it(tmp_path):
    """A hung rank: no phase change for many times the median step (and at least STALL_MIN_S): named, the one
    stuck outside a collective first; a rank saving a checkpoint, one just slow, and a job without a window of
    steps yet are not."""
    import json
    import time

    from hpclaunch.state import stragglers
    from hpclaunch.state.runfiles import RunFiles

    run = RunFiles(tmp_path)
    now = time.time()

    def record(rank, phase, quiet_s, win=(5, 1.5, 0.5)):
        path = run.progress_file(rank, 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rank": rank, "step": 12, "phase": phase, "t": now - quiet_s, "host": f"node{rank}",
                                    "win": list(win)}))

    record(0, "collective", 99.0)  # waits for rank 1 in the all-reduce
    record(1, "data", 100.0)  # hung in its data loader
    record(2, "checkpoint", 500.0)  # saving: busy on purpose
    record(3, "forward", 5.0)  # fine
    found = stragglers.stalled(run, now)
    assert [(f["rank"], f["phase"]) for f in found] == [(1, "data"), (0, "collective")], found
    assert found[0]["stalled_s"] == 100.0 and found[0]["median_step_s"] == 0.3
    assert stragglers.describe_stall(found[0]) == ("rank 1 on node1: no progress for 100 s in data at step 12 "
                                                    "(the median step takes 0.3 s)")
    assert stragglers.stalled(run, now - 75) == []  # 25 s: under STALL_MIN_S, not yet
    for rank in range(4):
        record(rank, "data", 100.0, win=(1, 0.3, 0.1))  # the first steps: no window to judge by
    assert stragglers.stalled(run, now) == []
