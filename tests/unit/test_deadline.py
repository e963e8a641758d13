"""When the ranks save on their own before the job's end (hpclaunch/runtime/train/deadline.py): the estimate of the
next checkpoint's time, and the decision at each log step."""

from __future__ import annotations

import json

import pytest

from hpclaunch.runtime.train.deadline import SAFETY_S, WRITE_MARGIN, EndClock, WriteEstimate, end_time, expected_write
from hpclaunch.state.runfiles import RunFiles


def _record(files: RunFiles, **rec: object) -> None:
    with open(files.checkpoint_log, "a") as f:
        f.write(json.dumps(rec) + "\n")


def test_the_last_measured_checkpoint_wins_over_the_plan(tmp_path):
    files = RunFiles(tmp_path)
    _record(files, step=10, blocked_s=1.0, write_s=9.0)
    _record(files, step=20, blocked_s=0.5, write_s=19.5)
    files.checkpoint_log.open("a").write("{broken\n")  # a writer killed mid-line
    got = expected_write(files, plan_bytes=1e12, write_gbps=1.0)
    assert got.seconds == 20.0 and "step 20" in got.source


def test_a_synchronous_write_counts_once(tmp_path):
    files = RunFiles(tmp_path)
    _record(files, step=10, blocked_s=30.0, write_s=29.0, **{"async": False})  # DeepSpeed: blocked for all of it
    assert expected_write(files, plan_bytes=None, write_gbps=1.0).seconds == 30.0


def test_before_the_first_checkpoint_the_plan_size_over_the_write_rate(tmp_path):
    got = expected_write(RunFiles(tmp_path), plan_bytes=654e9, write_gbps=2.0)
    assert got.seconds == pytest.approx(327.0) and "654 GB at 2 GB/s" in got.source
    assert expected_write(RunFiles(tmp_path), plan_bytes=None, write_gbps=2.0).seconds == 0.0


@pytest.mark.parametrize("text,expected", [("1795580000", 1795580000.0), ("", None), ("Unknown", None),
                                           ("0", None), (" 12.5 ", 12.5)])
def test_end_time_from_the_environment(text, expected):
    assert end_time({"HPCLAUNCH_END_TIME": text}) == expected


def test_saves_when_one_more_window_and_a_checkpoint_would_not_fit():
    write = WriteEstimate(100.0, "measured")
    clock = EndClock(end=10_000.0, write=write, decided_at=9_000.0)
    # 1000 s since the last decision: the next one is ~1000 s away; 10_000 - 9_500 = 500 s left < needed
    why = clock.must_save(9_500.0)
    assert why is not None and "500.0 s left" in why and "measured" in why
    # a short window far from the end: go on
    clock = EndClock(end=10_000.0, write=write, decided_at=8_000.0)
    assert clock.must_save(8_010.0) is None


def test_the_margin_is_exact_at_the_boundary():
    write = WriteEstimate(40.0, "plan")
    need = 10.0 + 40.0 * WRITE_MARGIN + SAFETY_S
    assert EndClock(end=1000.0 + need, write=write, decided_at=990.0).must_save(1000.0) is None
    assert EndClock(end=1000.0 + need - 1, write=write, decided_at=990.0).must_save(1000.0) is not None


def test_an_unknown_end_never_saves():
    assert EndClock(end=None, write=WriteEstimate(1e9, "huge"), decided_at=0.0).must_save(1e9) is None
