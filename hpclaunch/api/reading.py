"""What a job wrote: its logs, every rank and restart merged (`logs`), and why it failed (`diagnose`). A job
submitted over SSH is read on its login node."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from hpclaunch.logs.diagnose import Diagnosis
    from hpclaunch.logs.read import Line, Reader
    from hpclaunch.schedulers.base import JobStatus
    from hpclaunch.state.registry import JobRecord


@dataclass(frozen=True)
class Logs:
    """A job's lines: the rank logs restart by restart, then the job script's own output (rank None). `ranked`:
    it has rank logs; `restarts`: how many restarts they span. Its JSON: one {rank, restart, line} per line."""

    job_id: str
    lines: list[Line]
    ranked: bool = False
    restarts: int = 0
    notes: tuple[str, ...] = ()

    def to_json(self) -> list[dict[str, Any]]:
        return [line_json(line) for line in self.lines]


def line_json(line: Line) -> dict[str, Any]:
    """One line as `logs --json` prints it."""
    return {"rank": line.rank, "restart": line.restart, "line": line.text}


def record_of(job: str | None) -> tuple[JobRecord, tuple[str, ...]]:
    """JOB's record, or the newest job's (and a note naming it)."""
    from hpclaunch.state import registry

    if job is not None:
        return registry.get(job), ()
    record = registry.newest()
    return record, (f"hpclaunch: the newest job: {record.job_id}",)


def pattern(grep: str | None) -> re.Pattern[bytes] | None:
    """A --grep compiled once, over bytes as the logs are read; a bad one is the user's error, with an example."""
    from hpclaunch.errors import ConfigError

    try:
        return re.compile(grep.encode()) if grep else None
    except re.error as exc:
        raise ConfigError(f"--grep {grep!r} is not a regular expression: {exc}",
                          hint="quote it for the shell, e.g. --grep 'loss=[0-9.]+'") from exc


def logs(job: str | None = None, *, rank: int | None = None, restart: int | None = None, tail: int | None = None,
         grep: str | None = None, batch: bool = True) -> Logs:
    """JOB's lines (default: the newest job): every rank (or `rank`), every restart (or `restart`), the last `tail`
    of each, only those matching the regular expression `grep`; then the job script's own output (`batch`,
    without `rank`)."""
    from hpclaunch.errors import NotFoundError
    from hpclaunch.logs.read import LOCAL, batch_lines, merged
    from hpclaunch.state.runfiles import RunFiles

    record, notes = record_of(job)
    found = pattern(grep)
    run, reader = RunFiles(Path(record.run_dir)), cast("Reader", LOCAL)
    if record.remote:  # submitted over SSH: listed and read on the login node
        from hpclaunch.core.remote import ssh_host
        from hpclaunch.logs import remote

        host = ssh_host(record.remote)
        run = remote.listing(host, Path(record.run_dir))
        reader = remote.SshReader(host, run.root, Path(record.run_dir))
    files = run.rank_logs(rank=rank, restart=restart)
    if not files and rank is not None:
        raise NotFoundError("rank log", f"rank {rank} of job {record.job_id}",
                            hint=f"the job may not have started yet: `hpclaunch status {record.job_id}`")
    lines = list(merged(files, tail=tail, pattern=found, reader=reader))
    if rank is None and batch:
        lines += batch_lines(run.job_outputs(), tail=tail, pattern=found, reader=reader)
    if not lines and not files and rank is None:
        notes += (f"job {record.job_id} has written no logs yet (`hpclaunch status {record.job_id}` says why)",)
    return Logs(record.job_id, lines, bool(files), len({f.restart for f in files}), notes)


def diagnose(job: str | None = None, *, restart: int | None = None) -> Diagnosis:
    """Why JOB failed (default: the newest job): the cause, how sure (confidence) and the other evidence
    (candidates), the first failing rank, its node, the first real error (not the secondary errors of the ranks
    that waited), the log file and what to do; a job that completed after recovering inside its allocation: each
    recovery. `restart`: that restart's evidence (an earlier one: why it ended), not the latest's."""
    record, _ = record_of(job)
    run_dir = Path(record.run_dir)
    if record.remote:  # submitted over SSH: the ends of its logs read from the login node
        from hpclaunch.core.remote import ssh_host
        from hpclaunch.logs.remotediagnose import diagnose_remote

        return diagnose_remote(ssh_host(record.remote), run_dir, record.job_id, _status(record), restart=restart)
    from hpclaunch.logs.diagnose import diagnose as run_diagnose

    return run_diagnose(run_dir, record.job_id, _status(record), restart=restart)


def _status(record: JobRecord) -> JobStatus | None:
    from hpclaunch.errors import CommandError
    from hpclaunch.schedulers import get_scheduler

    try:
        return get_scheduler(record.scheduler, record.remote).status([record.job_id]).get(record.job_id)
    except CommandError:
        return None  # diagnose from the logs alone
