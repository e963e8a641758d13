"""hpclaunch logs JOB: merged per-rank output of every restart, tail, grep, follow, diagnose."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hpclaunch import api
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option, say

if TYPE_CHECKING:
    from hpclaunch.logs.read import Line
    from hpclaunch.state import registry


def _print_diagnosis(d) -> None:  # noqa: ANN001 - hpclaunch.logs.diagnose.Diagnosis
    head = f"job {d.job_id}"
    if d.state:
        head += f" {d.state}" + (f" (exit {d.exit_code})" if d.exit_code else "")
    if d.restart is not None:
        head += f", restart {d.restart}" + (f" of {len(d.restarts)}" if len(d.restarts) > 1 else "")
        head += f", {d.ranks} rank log(s)"
    click.echo(head)
    cause = d.title if d.rank is None or d.title.startswith("rank ") else f"{d.title} on rank {d.rank}"
    sure = f" ({d.layer}; confidence {d.confidence:.2f})" if d.cause and d.layer else (
        f" (confidence {d.confidence:.2f})" if d.cause else "")
    click.echo(f"cause: {cause}{sure}")
    if d.first_failure:
        ff = d.first_failure
        click.echo(f"first failure: rank {ff['rank']} on {ff['host']} at {ff['time']} (exit {ff['exit']})")
    for label, value in (("node", d.node), ("error", d.error), ("log", d.file)):
        if value:
            click.echo(f"{label}: {value}")
    if d.waiting_ranks and d.cause:
        ranks = ", ".join(map(str, d.waiting_ranks[:16])) + (" ..." if len(d.waiting_ranks) > 16 else "")
        click.echo(f"then: rank(s) {ranks} failed or waited in a collective (secondary errors, skipped)")
    for c in d.candidates[:5]:
        where = f"rank {c['rank']}" if c.get("rank") is not None else Path(c["file"]).name
        click.echo(f"also: {c['class']} ({where}): {c['line'][:160]}")
    for s in d.suspicious:
        click.echo(f"suspicious: {Path(s['file']).name}: {s['line'][:200]}")
    for rec in d.recoveries:
        click.echo(f"recovered: {rec['summary']}")
    if d.hint:
        click.echo(f"hint: {d.hint}")


@click.command("logs", epilog=examples(
    "hpclaunch logs 12345  # every rank, every restart",
    "hpclaunch logs -n 20  # the newest job",
    "hpclaunch logs 12345 --rank 3 -f  # follow rank 3 until the job ends",
    "hpclaunch logs 12345 -n 100 --grep loss  # the last 100 matching lines of each rank",
    "hpclaunch logs 12345 --diagnose  # the first failing rank and what to do",
    "hpclaunch logs 12345 --diagnose --restart 0  # why restart 0 ended (a job that recovered)"))
@click.argument("job", required=False, shell_complete=complete.job)
@click.option("--rank", "-r", type=int, default=None, help="only this rank")
@click.option("--restart", type=int, default=None,
              help="only this restart (default: all, in order); with --diagnose: that restart's evidence")
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
    if diagnose or follow:
        record, notes = api.record_of(job)
        say(notes)
        if diagnose:
            found = api.diagnose(record.job_id, restart=restart)
            echo_json(found) if as_json else _print_diagnosis(found)
        else:
            _follow(record, rank, tail, grep, _printer(as_json), as_json)
        return
    _print_logs(api.logs(job, rank=rank, restart=restart, tail=tail, grep=grep), _printer(as_json), as_json)


def _printer(as_json: bool) -> Callable[[Line], None]:
    """How each line goes out: a JSON object with --json, else the text behind its rank's prefix."""
    def emit(line: Line) -> None:
        if as_json:
            echo_json(api.line_json(line))
        else:
            click.echo(line.prefixed())

    return emit


def _follow(record: registry.JobRecord, rank: int | None, tail: int | None, grep: str | None,
            emit: Callable[[Line], None], as_json: bool) -> None:
    """-f: the last --tail lines first, then new lines as they are written, until the job ends (a job submitted
    over SSH: streamed from its login node, hpclaunch/logs/remote.py)."""
    from hpclaunch.api.following import follow
    from hpclaunch.cli.follow import StatusLine, print_followed

    if tail:
        shown = api.logs(record.job_id, rank=rank, tail=tail, grep=grep, batch=False)
        _print_logs(shown, emit, as_json=True)
    events = follow(record.job_id, rank=rank, grep=grep, start_at_end=bool(tail))
    status = None if as_json or record.remote else StatusLine(Path(record.run_dir))
    print_followed(record.job_id, events, emit, restarts=not as_json, status=status)


def _print_logs(shown: api.Logs, emit: Callable[[Line], None], as_json: bool) -> None:
    """The rank logs restart by restart (a header at each restart when there are several), then the batch
    output (under a header when there were rank logs); then what was said (nothing written yet)."""
    current = None
    batch_header = shown.ranked and not as_json
    for line in shown.lines:
        if line.rank is None and batch_header:
            click.echo("==> batch output <==")
            batch_header = False
        elif line.rank is not None and shown.restarts > 1 and line.restart != current and not as_json:
            click.echo(f"==> restart {line.restart} <==")
            current = line.restart
        emit(line)
    say(shown.notes)


def register(group: click.Group) -> None:
    group.add_command(logs_cmd)
