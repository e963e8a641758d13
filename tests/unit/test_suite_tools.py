"""The suite's own tools (docs/testing.md): the order the test files run in on xdist workers (longest first, from
tests/durations.json), the time table `scripts/test-times.py` prints from pytest's JUnit XML, and the queue-aware
deadline of the integration tests."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import conftest
from tests.integration import waiting

REPO = Path(__file__).resolve().parents[2]


@dataclass
class _Item:
    nodeid: str


def test_the_longest_files_run_first_each_file_together_in_its_own_order(tmp_path, monkeypatch):
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"tests/a.py": 5, "tests/b.py": 100}))
    monkeypatch.setattr(conftest, "DURATIONS", durations)
    items = [_Item(n) for n in ("tests/a.py::t1", "tests/a.py::t2", "tests/c.py::t1", "tests/b.py::t2",
                                "tests/b.py::t1")]
    conftest._longest_files_first(items)  # type: ignore[arg-type]
    # b (100 s) first, then c (not listed: UNKNOWN_FILE_S, 30 s), then a (5 s); each file's tests as collected
    assert [i.nodeid for i in items] == ["tests/b.py::t2", "tests/b.py::t1", "tests/c.py::t1", "tests/a.py::t1",
                                         "tests/a.py::t2"]


def test_the_recorded_durations_name_files_that_exist():
    recorded = json.loads((REPO / "tests" / "durations.json").read_text())
    assert len(recorded) > 100
    missing = [f for f in recorded if not (REPO / f).is_file()]
    assert not missing, f"tests/durations.json names files that are gone (HPCLAUNCH_RECORD_DURATIONS=1): {missing}"


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.integration.test_slow" name="test_a" time="40.5"/>
<testcase classname="tests.integration.test_slow" name="test_b[x]" time="9.5"/>
<testcase classname="tests.unit.test_fast" name="test_c" time="0.2"/>
<testcase classname="tests.unit.test_other" name="test_d" time="0.3"/>
</testsuite></testsuites>
"""


def test_test_times_prints_each_integration_file_the_unit_tests_and_the_slowest(tmp_path):
    xml = tmp_path / "run.xml"
    xml.write_text(JUNIT)
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "test-times.py"), str(xml), "--top", "2"],
                         capture_output=True, text=True, check=True).stdout
    assert "| tests/integration/test_slow.py | 2 | 50 |" in out
    assert "| tests/unit (all files) | 2 | 0 |" in out
    assert "| **all** | 4 | 50 |" in out
    assert out.index("test_slow.py::test_a | 40 |") < out.index("test_slow.py::test_b[x] | 10 |")
    assert "test_fast" not in out.split("slowest tests")[1]  # --top 2


def test_a_deadline_does_not_count_the_time_a_job_waits_for_nodes(monkeypatch):
    clock = [1000.0]
    queued = [True]
    monkeypatch.setattr(waiting.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(waiting, "queued_for_nodes", lambda jobs: queued[0])
    deadline = waiting.Deadline(60, ["42"])
    for _ in range(10):  # 100 s queued for nodes, looked at every 10 s
        clock[0] += 10
        assert not deadline.expired()
    queued[0] = False  # the job runs: from here the test's own 60 s (the 10 s after the last look still counted queued)
    for _ in range(13):  # 65 s, looked at every 5 s (as a wait loop polling each second does)
        clock[0] += 5
        assert not deadline.expired()
    clock[0] += 10
    assert deadline.expired()
    with pytest.raises(AssertionError, match=r"the ranks did not start in 60 s \(\+1\d\d s queued for nodes\)"):
        deadline.check("the ranks did not start")


def test_a_deadline_without_queued_jobs_is_a_plain_timeout(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(waiting.time, "monotonic", lambda: clock[0])
    deadline = waiting.Deadline(10)
    clock[0] = 9.9
    assert not deadline.expired()
    clock[0] = 10.1
    assert deadline.expired()
    assert not waiting.queued_for_nodes(["local-12"])  # not a Slurm job id: never asks squeue
