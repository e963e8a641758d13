"""hpclaunch logs JOB: merged per-rank output of every restart, tail, grep, follow, diagnose."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option
from hpclaunch.errors import CommandError, ConfigError, NotFoundError
from hpclaunch.logs.read import LOCAL
from hpclaunch.schedulers import JobStatus, get_scheduler
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.logs.read import Line, Reader


def _status(record: registry.JobRecord) -> JobStatus | None:
    try:
        return get_scheduler(record.scheduler, record.remote).status([record.job_id]).get(record.job_id)
    except CommandError:
        return None  # diagnose from the logs alone


def _print_diagnosis(d) -> None:  # noqa: ANN001 - hpclaunch.logs.diagnose.Diagnosis
    head = f"job {d.job_id}"
    if d.state:
        head += f" {d.state}" + (f" (exit {d.exit_code})" if d.exit_code else "")
    if d.restart is not None:
        head += f", restart {d.restart}" + (f" of {len(d.restarts)}" if len(d.restarts) > 1 else "")
        head += f", {d.ranks} rank log(s)"
    click.echo(head)
    cause = d.title if d.rank is None or d.title.startswith("rank ") else f"{d.title} on rank {d.rank}"
    click.echo(f"cause: {cause}")
    if d.first_failure:
        ff = d.first_failure
        click.echo(f"first failure: rank {ff['rank']} on {ff['host']} at {ff['time']} (exit {ff['exit']})")
    for label, value in (("node", d.node), ("error", d.error), ("log", d.file)):
        if value:
            click.echo(f"{label}: {value}")
    if d.waiting_ranks and d.cause:
        ranks = ", ".join(map(str, d.waiting_ranks[:16])) + (" ..." if len(d.waiting_ranks) > 16 else "")
        click.echo(f"then: rank(s) {ranks} failed or waited in a collective (secondary errors, skipped)")
    if d.hint:
        click.echo(f"hint: {d.hint}")


@click.command("logs", epilog=examples(
    "hpclaunch logs 12345  # every rank, every restart",
    "hpclaunch logs -n 20  # the newest job",
    "hpclaunch logs 12345 --rank 3 -f  # follow rank 3 until the job ends",
    "hpclaunch logs 12345 -n 100 --grep loss  # the last 100 matching lines of each rank",
    "hpclaunch logs 12345 --diagnose  # the first failing rank and what to do"))
@click.argument("job", required=False, shell_complete=complete.job)
@click.option("--rank", "-r", type=int, default=None, help="only this rank")
@click.option("--restart", type=int, default=None, help="only this restart (default: all, in order)")
@click.option("--tail", "-n", type=int, default=None, metavar="N", help="the last N lines of each rank")
@click.option("--grep", "grep", default=None, metavar="RE", help="only lines matching this regex")
@click.option("--follow", "-f", is_flag=True, help="print new lines as they are written, until the job ends")
@click.option("--diagnose", is_flag=True, help="the first failing rank, the first real error and what to do")
@json_option
def logs_cmd(job: str | None, rank: int | None, restart: int | None, tail: int | None, grep: str | None,
             follow: bool, diagnose: bool, as_json: bool) -> None:
    """Merged per-rank output of JOB (default: the newest job; each line prefixed with its rank), every restart in
    order.

    With --json, one {"rank", "restart", "line"} object per line."""
    if job is None:
        record = registry.newest()
        job = record.job_id
        click.echo(f"hpclaunch: the newest job: {job}", err=True)
    else:
        record = registry.get(job)
    run_dir = Path(record.run_dir)
    if diagnose:
        _diagnose(record, run_dir, as_json)
        return
    if record.remote:
        _remote_logs(record, rank, restart, tail, _pattern(grep), _printer(as_json), as_json, follow)
        return
    pattern = _pattern(grep)
    emit = _printer(as_json)
    if follow:
        _follow(record, run_dir, rank, tail, pattern, emit, as_json)
        return
    _print_logs(job, RunFiles(run_dir), rank, restart, tail, pattern, emit, as_json)


def _diagnose(record: registry.JobRecord, run_dir: Path, as_json: bool) -> None:
    """--diagnose: the first failing rank and what to do, instead of the lines."""
    if record.remote:  # submitted over SSH: the ends of its logs read from the login node
        from hpclaunch.core.remote import ssh_host
        from hpclaunch.logs.remotediagnose import diagnose_remote

        d = diagnose_remote(ssh_host(record.remote), run_dir, record.job_id, _status(record))
    else:
        from hpclaunch.logs.diagnose import diagnose as run_diagnose

        d = run_diagnose(run_dir, record.job_id, _status(record))
    if as_json:
        echo_json(d.to_dict())
    else:
        _print_diagnosis(d)


def _pattern(grep: str | None) -> re.Pattern[bytes] | None:
    """--grep compiled once, over bytes as the logs are read; a bad one is the user's error, with a quoted example."""
    try:
        return re.compile(grep.encode()) if grep else None
    except re.error as exc:
        raise ConfigError(f"--grep {grep!r} is not a regular expression: {exc}",
                          hint="quote it for the shell, e.g. --grep 'loss=[0-9.]+'") from exc


def _printer(as_json: bool) -> Callable[[Line], None]:
    """How each line goes out: a JSON object with --json, else the text behind its rank's prefix."""
    def emit(line: Line) -> None:
        if as_json:
            echo_json({"rank": line.rank, "restart": line.restart, "line": line.text})
        else:
            click.echo(line.prefixed())

    return emit


def _follow(record: registry.JobRecord, run_dir: Path, rank: int | None, tail: int | None,
            pattern: re.Pattern[bytes] | None, emit: Callable[[Line], None], as_json: bool) -> None:
    """-f: the last --tail lines first, then new lines as they are written, until the job ends."""
    from hpclaunch.cli.follow import StatusLine, print_followed
    from hpclaunch.logs.follow import follow_job
    from hpclaunch.logs.read import merged
    from hpclaunch.state.runfiles import RunFiles

    if tail:
        for line in merged(RunFiles(run_dir).rank_logs(rank=rank), tail=tail, pattern=pattern):
            emit(line)
    events = follow_job(record.job_id, rank=rank, pattern=pattern, start_at_end=bool(tail))
    print_followed(record.job_id, events, emit, restarts=not as_json,
                   status=None if as_json else StatusLine(run_dir))


def _remote_logs(record: registry.JobRecord, rank: int | None, restart: int | None, tail: int | None,
                 pattern: re.Pattern[bytes] | None, emit: Callable[[Line], None], as_json: bool, follow: bool) -> None:
    """The logs of a job submitted over SSH, streamed from the login node (hpclaunch/logs/remote.py)."""
    from hpclaunch.core.remote import ssh_host
    from hpclaunch.logs import remote

    assert record.remote is not None
    host, run_dir = ssh_host(record.remote), Path(record.run_dir)
    if not follow:
        listed = remote.listing(host, run_dir)
        _print_logs(record.job_id, listed, rank, restart, tail, pattern, emit, as_json,
                    remote.SshReader(host, listed.root, run_dir))
        return
    from hpclaunch.cli.follow import print_followed

    if tail:
        listed = remote.listing(host, run_dir)
        _print_logs(record.job_id, listed, rank, restart, tail, pattern, emit, True,
                    remote.SshReader(host, listed.root, run_dir), batch=False)
    events = remote.follow_record(record, rank=rank, pattern=pattern, start_at_end=bool(tail))
    print_followed(record.job_id, events, emit, restarts=not as_json, status=None)


def _print_logs(job: str, run: RunFiles, rank: int | None, restart: int | None, tail: int | None,
                pattern: re.Pattern[bytes] | None, emit: Callable[[Line], None], as_json: bool,
                reader: Reader = LOCAL, batch: bool = True) -> None:
    """The rank logs restart by restart, then the batch output; when there is nothing, where to look instead."""
    from hpclaunch.logs.read import batch_lines, merged

    files = run.rank_logs(rank=rank, restart=restart)
    restarts = {f.restart for f in files}
    shown = 0
    current = None
    for line in merged(files, tail=tail, pattern=pattern, reader=reader):
        if len(restarts) > 1 and line.restart != current and not as_json:
            click.echo(f"==> restart {line.restart} <==")
        current = line.restart
        emit(line)
        shown += 1
    if rank is None and batch:
        header = bool(files) and not as_json
        for line in batch_lines(run.job_outputs(), tail=tail, pattern=pattern, reader=reader):
            if header:
                click.echo("==> batch output <==")
                header = False
            emit(line)
            shown += 1
    if not shown and not files and rank is None:
        click.echo(f"job {job} has written no logs yet (`hpclaunch status {job}` says why)", err=True)
    if not files and rank is not None:
        raise NotFoundError("rank log", f"rank {rank} of job {job}",
                            hint=f"the job may not have started yet: `hpclaunch status {job}`")


def register(group: click.Group) -> None:
    group.add_command(logs_cmd)
