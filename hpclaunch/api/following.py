"""Following a job as it runs: `follow` yields what it writes and how its state changes (hpclaunch/logs/follow.py;
a job submitted over SSH is streamed from its login node), `progress` is its step, loss and ETA in one line, and
`frame` is the live view's rows (hpclaunch/jobs/watch.py), `row` one job's. The faces print them; nothing here
prints."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.jobs.watch import COLUMNS, MIN_WIDTH
from hpclaunch.logs.follow import End, Event, Restart, State
from hpclaunch.logs.read import Line

if TYPE_CHECKING:
    from hpclaunch.api import JobStatus
    from hpclaunch.jobs.view import JobView
    from hpclaunch.jobs.watch import Row
    from hpclaunch.state.registry import JobRecord

__all__ = ["COLUMNS", "MIN_WIDTH", "End", "Event", "Line", "Restart", "State", "follow", "frame", "plain_lines",
           "progress", "row", "sweep_changes"]


def follow(job: str, *, rank: int | None = None, grep: str | None = None, start_at_end: bool = False,
           output_only: bool = False) -> Iterator[Event]:
    """JOB's events until it ends: each new line (every rank's, or `rank`'s; `output_only`: the job script's own
    output, as `submit --follow` shows it), each change of state, each restart, the end. `start_at_end`: only
    lines written from now on."""
    from hpclaunch.api.reading import pattern
    from hpclaunch.state import registry

    record = registry.get(job)
    if record.remote:  # submitted over SSH: streamed from the login node (hpclaunch/logs/remote.py)
        from hpclaunch.logs.remote import follow_record

        return follow_record(record, rank=rank, pattern=pattern(grep), start_at_end=start_at_end)
    from hpclaunch.logs.follow import follow_job

    if output_only:
        return follow_job(record.job_id, rank_logs=False, job_output=record.job_id)
    return follow_job(record.job_id, rank=rank, pattern=pattern(grep), start_at_end=start_at_end)


def sweep_changes(sweep_id: str, ids: Sequence[str], scheduler_name: str, *, poll: float = 2.0,
                  unknown_limit: int = 10) -> Iterator[tuple[str, JobStatus]]:
    """A sweep's elements (`ids`) as their states change, one scheduler call per `poll` s for them all: each
    element at the first call, then each change, until every element has ended (the last state yielded for each
    is its end). JobLost when the scheduler has not known some of them for `unknown_limit` calls in a row."""
    import time

    from hpclaunch.api.tracking import states
    from hpclaunch.logs.follow import JobLost

    seen: dict[str, str] = {}
    unknown = 0
    while True:
        found = states(list(ids), scheduler_name)
        for job_id in ids:
            if seen.get(job_id) != found[job_id].state:
                seen[job_id] = found[job_id].state
                yield job_id, found[job_id]
        unknown = unknown + 1 if "UNKNOWN" in seen.values() else 0
        if unknown >= unknown_limit:
            raise JobLost(f"sweep {sweep_id}: the scheduler no longer knows some of its elements (UNKNOWN at "
                          f"{unknown} checks in a row); stopped following it",
                          hint=f"`hpclaunch status {sweep_id}` shows what is known")
        if all(s.finished for s in found.values()):
            return
        time.sleep(poll)


def progress(run_dir: Path) -> str:
    """A running job's progress in one line: step / max, loss, tokens/s, ETA ("" before its first metrics)."""
    from hpclaunch.jobs.watch import progress_text

    return progress_text(run_dir)


def frame(records: Sequence[JobRecord], jobs: Sequence[str]) -> list[Row]:
    """The live view's rows now: the named jobs, or the running and recent ones of `records`."""
    from hpclaunch.jobs.watch import frame as rows

    return rows(list(records), jobs)


def row(view: JobView) -> Row:
    """One job's row of the live view from its view (`status`, `jobs`): step / max, loss, tokens/s, ETA, the loss's
    recent trend, its stragglers."""
    from hpclaunch.jobs.watch import row as one

    return one(view)


def plain_lines(rows: Sequence[Row], stamp: str) -> list[str]:
    """The live view's rows as plain text (not on a terminal)."""
    from hpclaunch.jobs.watch import plain_lines as lines

    return list(lines(list(rows), stamp))
