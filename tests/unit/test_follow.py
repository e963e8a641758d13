"""Following a job (hpclaunch.logs.follow, `logs -f`, `submit --follow`): new lines, new restarts, the end,
a job the scheduler forgot (UNKNOWN), and Ctrl-C."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import hpclaunch.logs.follow as follow_mod
from hpclaunch.cli.main import cli
from hpclaunch.logs.follow import End, JobLost, Restart, State, follow
from hpclaunch.logs.read import Line
from hpclaunch.schedulers.base import JobStatus
from hpclaunch.schedulers.slurm.reasons import in_words
from tests.fixtures.jobrecords import add_local_record

FAST = {"poll": 0.01, "status_every": 0.0, "settle": 0.0}


def _states(*states: str) -> Callable[[], JobStatus]:
    """A status() answering `states` in turn, then the last one for ever."""
    it = iter(states)
    last = [states[-1]]

    def status() -> JobStatus:
        last[0] = next(it, last[0])
        return JobStatus("7", last[0])

    return status


def test_follow_streams_new_lines_and_new_restarts_until_the_end(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    ended = threading.Event()

    def writer() -> None:
        with open(logs / "rank-0.restart-0.log", "w") as f:
            for i in range(3):
                f.write(f"a{i}\n")
                f.flush()
                time.sleep(0.05)
            f.write("partial")  # completed later
            f.flush()
            time.sleep(0.1)
            f.write(" line\n")
        (logs / "rank-0.restart-1.log").write_text("after requeue\n")
        time.sleep(0.2)
        ended.set()

    t = threading.Thread(target=writer)
    t.start()
    events = list(follow(tmp_path, lambda: JobStatus("7", "COMPLETED" if ended.is_set() else "RUNNING"),
                         poll=0.02, status_every=0.0))
    t.join()
    assert [e.text for e in events if isinstance(e, Line)] == ["a0", "a1", "a2", "partial line", "after requeue"]
    assert [e for e in events if isinstance(e, Restart)] == [Restart(1)]
    assert events.index(Restart(1)) == len(events) - 3  # just before the first line of restart 1
    assert events[-1] == End(JobStatus("7", "COMPLETED"))


def test_follow_the_job_output_and_an_unfinished_last_line(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "job.7.out").write_text("hpclaunch: start\nno newline at the end")
    (tmp_path / "logs" / "rank-0.restart-0.log").write_text("a rank line\n")
    events = list(follow(tmp_path, _states("RUNNING", "FAILED"), rank_logs=False, job_output="7", **FAST))
    assert events == [State(JobStatus("7", "RUNNING")), Line(None, -1, "hpclaunch: start"),
                      Line(None, -1, "no newline at the end"), End(JobStatus("7", "FAILED"))]


def test_follow_ends_when_the_state_stays_unknown(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-0.restart-0.log").write_text("last words\n")
    got: list[object] = []
    with pytest.raises(JobLost) as err:
        got.extend(follow(tmp_path, _states("RUNNING", "UNKNOWN"), unknown_limit=3, **FAST))
    assert got == [State(JobStatus("7", "RUNNING")), Line(0, 0, "last words")]  # what was written is shown first
    assert err.value.exit_code == 1
    assert "job 7: the scheduler no longer knows this job (state UNKNOWN at 3 checks in a row)" in str(err.value)
    assert "hpclaunch cancel 7" in str(err.value)
    shutil.rmtree(tmp_path)
    with pytest.raises(JobLost, match=f"its run directory {tmp_path} is gone"):
        list(follow(tmp_path, _states("UNKNOWN"), unknown_limit=2, **FAST))


def test_follow_waits_through_a_short_unknown(tmp_path: Path) -> None:
    events = list(follow(tmp_path, _states("UNKNOWN", "UNKNOWN", "RUNNING", "UNKNOWN", "COMPLETED"),
                         unknown_limit=3, **FAST))
    assert events == [State(JobStatus("7", "RUNNING")), End(JobStatus("7", "COMPLETED"))]


@pytest.fixture
def deleted_job(tmp_path: Path, hpc_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A recorded local job whose run directory was deleted: the local scheduler says UNKNOWN."""
    add_local_record("local-3", tmp_path / "gone")
    for key, value in FAST.items():
        monkeypatch.setitem(follow_mod.follow.__kwdefaults__, key, value)
    return "local-3"


def test_logs_follow_of_a_forgotten_job_ends_with_a_message(deleted_job: str) -> None:
    res = CliRunner().invoke(cli, ["logs", deleted_job, "-f"])
    assert res.exit_code == 1, res.output
    assert "no longer knows this job" in res.output and "is gone" in res.output
    assert "Traceback" not in res.output


def _interrupted(*args: object, **kwargs: object) -> Iterator[Line]:
    yield Line(0, 0, "step 1")
    raise KeyboardInterrupt


def test_ctrl_c_in_logs_follow_exits_130_and_says_how_to_reattach(
    deleted_job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow_mod, "follow_job", _interrupted)
    res = CliRunner().invoke(cli, ["logs", deleted_job, "-f"])
    assert res.exit_code == 130
    assert "[rank0] step 1" in res.output
    assert f"hpclaunch logs {deleted_job} -f" in res.output and f"hpclaunch cancel {deleted_job}" in res.output
    assert "still runs" in res.output


@pytest.fixture
def fake_submit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`submit` without a scheduler: the job is 'queued' as local-3."""
    import hpclaunch.submission.submit as submission

    def done(spec: object, *_: object, **__: object) -> SimpleNamespace:
        return SimpleNamespace(job_id="local-3", run_dir=tmp_path, script_path=tmp_path / "job.sbatch", warnings=(),
                               script="", spec=spec)

    monkeypatch.setattr(submission, "submit", done)


def test_ctrl_c_in_submit_follow_exits_130(deleted_job: str, fake_submit: None,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow_mod, "follow_job", _interrupted)
    res = CliRunner().invoke(cli, ["submit", "allreduce", "--profile", "local", "--follow"])
    assert res.exit_code == 130, res.output
    assert "step 1" in res.output and "hpclaunch logs local-3 -f" in res.output


def test_submit_follow_of_a_forgotten_job_ends(deleted_job: str, fake_submit: None) -> None:
    res = CliRunner().invoke(cli, ["submit", "allreduce", "--profile", "local", "--follow"])
    assert res.exit_code == 1, res.output
    assert "no longer knows this job" in res.output


def test_follow_says_why_a_job_is_queued_and_when_the_reason_changes(tmp_path: Path) -> None:
    def pending(code: str) -> JobStatus:  # as the Slurm scheduler answers: the code and its words
        return JobStatus("7", "PENDING", reason=code, reason_text=in_words(code, "7"))

    answers = iter([pending("Priority"), pending("Priority"), pending("Resources"),
                    JobStatus("7", "RUNNING", nodes="n1")])
    last = [JobStatus("7", "COMPLETED")]
    events = list(follow(tmp_path, lambda: next(answers, last[0]), **FAST))
    states = [e for e in events if isinstance(e, State)]
    assert [e.text for e in states] == [
        "job 7 is queued: other jobs with higher priority are ahead in the queue (wait, or ask for fewer nodes or "
        "less time to fit a backfill slot)",
        "job 7 is queued: waiting for nodes/GPUs to become free (it starts when running jobs end)",
        "job 7 is running on n1",
    ]


def test_logs_follow_of_a_queued_local_job_says_why_it_waits_then_that_it_runs(hpclaunch, hpc_home: Path) -> None:
    """A real local sweep with one element at a time: the second element is queued (JobArrayTaskLimit) until the
    first ends; `logs -f` of it says so in words, then that it runs."""
    import json

    from tests.fixtures.jobrecords import wait_local
    from tests.unit.test_sweeps import _submit_local

    info = json.loads(hpclaunch("submit", "allreduce", "--profile", "local", "--sweep", "train.lr=1,2",
                                "--max-parallel", "1", "--dry-run", "--json").stdout)
    for element, seconds in zip(info["elements"], (1, 1.5), strict=True):
        (Path(element["run_dir"]) / "job.sbatch").write_text(f"#!/bin/bash\nsleep {seconds}\necho element done\n")
    _, ids = _submit_local(info, 1)
    assert wait_local(ids[0], until="RUNNING") == "RUNNING"
    res = hpclaunch("logs", ids[1], "-f")
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith(f"hpclaunch: job {ids[1]} is queued: the array's limit of tasks running at once")
    assert lines[1] == f"hpclaunch: job {ids[1]} is running on localhost"
