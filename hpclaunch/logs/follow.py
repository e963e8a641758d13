"""Follow a job live: one generator of what happens in its run directory until the job ends. It yields
the new complete lines of the job script's output and of every rank log, a `Restart` when the files of a
new restart appear, a `State` when the job's state or pending reason changes (queued, why, then running),
and `End` with the job's last status. `submit --follow` and `logs -f` print it.

A job the scheduler no longer knows (state UNKNOWN for `unknown_limit` checks in a row: its run
directory was deleted, or Slurm forgot it) ends the following with JobLost instead of waiting forever.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpclaunch.errors import HpclaunchError
from hpclaunch.logs.read import Line
from hpclaunch.schedulers.base import JobStatus
from hpclaunch.state.runfiles import RunFiles

UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Restart:
    """The files of restart `restart` appeared (the job was requeued)."""

    restart: int


@dataclass(frozen=True)
class End:
    """The job ended: the last event."""

    status: JobStatus


@dataclass(frozen=True)
class State:
    """The job's state or its pending reason changed (first yielded at the first check)."""

    status: JobStatus

    @property
    def text(self) -> str:
        """`job 42 is queued: waiting for nodes/GPUs to become free (it starts when running jobs end)`."""
        s = self.status
        if s.state == "PENDING":
            return f"job {s.job_id} is queued" + (f": {s.reason_text}" if s.reason_text else "")
        if s.state == "RUNNING":
            return f"job {s.job_id} is running" + (f" on {s.nodes}" if s.nodes else "")
        return f"job {s.job_id} is {s.state}" + (f" ({s.reason})" if s.reason else "")


Event = Line | Restart | State | End


class JobLost(HpclaunchError):
    """The scheduler stopped knowing a followed job."""

    exit_code = 1


class _Tail:
    """The new complete lines of one file at each read; the unfinished last line waits for its end."""

    def __init__(self, path: Path, rank: int | None, restart: int, *, at_end: bool):
        self.path, self.rank, self.restart = path, rank, restart
        self.offset = path.stat().st_size if at_end else 0
        self.partial = b""

    def read(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:  # deleted under us: nothing more to read
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return lines

    def rest(self) -> list[bytes]:
        rest, self.partial = self.partial, b""
        return [rest] if rest else []


def follow(run_dir: Path, status: Callable[[], JobStatus], *, rank: int | None = None,
           pattern: re.Pattern[bytes] | None = None, rank_logs: bool = True, job_output: str | None = None,
           poll: float = 0.5, status_every: float = 1.0, start_at_end: bool = False, unknown_limit: int = 5,
           settle: float = 0.2) -> Iterator[Event]:
    """Events of the job whose run directory is `run_dir`, until `status()` says it has finished.

    rank_logs: follow the rank logs (of `rank` only, if given); job_output: follow the job script's output
    of this job id (its lines have rank None). pattern: only lines that match. start_at_end: skip what the
    files hold when following starts. The status is asked every `status_every` seconds, before the files
    are read, so nothing written before the end is lost; after the end, the files are read once more
    `settle` seconds later and an unfinished last line is yielded as it is."""
    files = RunFiles(run_dir)
    tails: dict[Path, _Tail] = {}
    restarts: set[int] = set()
    last_check = float("-inf")
    unknown = 0
    first = True
    shown: tuple[str, str | None] | None = None
    while True:
        end = None
        if time.monotonic() - last_check >= status_every:
            last_check = time.monotonic()
            now = status()
            unknown = unknown + 1 if now.state == UNKNOWN else 0
            if now.finished or unknown >= unknown_limit:
                end = now
                time.sleep(settle)
            elif now.state != UNKNOWN and (now.state, now.reason) != shown:
                shown = (now.state, now.reason)
                yield State(now)
        sources: list[tuple[Path, int | None, int]] = []
        if job_output is not None:
            sources.append((files.job_output(job_output), None, -1))
        if rank_logs:
            sources += [(lf.path, lf.rank, lf.restart) for lf in files.rank_logs(rank=rank)]
        for path, who, restart in sources:
            tail = tails.get(path)
            if tail is None:
                try:
                    tail = tails[path] = _Tail(path, who, restart, at_end=first and start_at_end)
                except OSError:  # not written yet, or deleted
                    continue
                if who is not None and restart not in restarts:
                    if restarts and restart > max(restarts) and not (first and start_at_end):
                        yield Restart(restart)
                    restarts.add(restart)
            yield from _lines(tail, tail.read(), pattern)
        first = False
        if end is not None:
            for tail in tails.values():
                yield from _lines(tail, tail.rest(), pattern)
            if end.state == UNKNOWN:
                raise lost(end.job_id, run_dir, unknown)
            yield End(end)
            return
        time.sleep(poll)


def _lines(tail: _Tail, raws: list[bytes], pattern: re.Pattern[bytes] | None) -> Iterator[Line]:
    for raw in raws:
        if pattern is None or pattern.search(raw):
            yield Line(tail.rank, tail.restart, raw.decode("utf-8", "replace").rstrip("\r"))


def lost(job_id: str, run_dir: Path, checks: int) -> JobLost:
    gone = "" if run_dir.is_dir() else f"; its run directory {run_dir} is gone"
    return JobLost(f"job {job_id}: the scheduler no longer knows this job (state {UNKNOWN} at {checks} checks "
                   f"in a row){gone}; stopped following it",
                   hint=f"`hpclaunch status {job_id}` shows what is known; if it still runs: "
                        f"`hpclaunch cancel {job_id}`")


def follow_job(job_id: str, **options: Any) -> Iterator[Event]:
    """`follow` for a recorded job: its run directory, and its status from its scheduler."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.state import registry

    record = registry.get(job_id)
    scheduler = get_scheduler(record.scheduler, record.remote)
    return follow(Path(record.run_dir), lambda: scheduler.status([record.job_id])[record.job_id], **options)
