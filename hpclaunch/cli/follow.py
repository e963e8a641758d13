"""Printing a followed job (`submit --follow`, `logs -f`): what hpclaunch.logs.follow yields, and Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import click

from hpclaunch.logs.follow import End, Event, Restart, State
from hpclaunch.logs.read import Line
from hpclaunch.schedulers.base import JobStatus

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


def print_followed(job_id: str, events: Iterator[Event], emit: Callable[[Line], None], *,
                   restarts: bool = True) -> JobStatus | None:
    """Print each line through `emit` (and `==> restart N <==` when a new restart starts); return the job's
    final status. While the job is queued, say why on stderr, again each time the reason changes, and when
    it starts. Ctrl-C stops the following, not the job: say so and how to re-attach or cancel, exit 130."""
    queued = False
    try:
        for event in events:
            if isinstance(event, Line):
                emit(event)
            elif isinstance(event, State):
                queued = _say_state(event, queued)
            elif isinstance(event, Restart) and restarts:
                click.echo(f"==> restart {event.restart} <==")
            elif isinstance(event, End):
                return event.status
    except KeyboardInterrupt:
        click.echo(f"\nhpclaunch: stopped following job {job_id}; the job still runs.\n"
                   f"  re-attach: hpclaunch logs {job_id} -f\n"
                   f"  cancel it: hpclaunch cancel {job_id}", err=True)
        raise click.exceptions.Exit(INTERRUPTED) from None
    return None


def _say_state(event: State, queued: bool) -> bool:
    """Print a state change on stderr: every one while queued, and the start of a job that was queued (a job
    found running needs no word). Returns whether the job is (or was) queued."""
    if event.status.state == "RUNNING" and not queued:
        return False
    click.echo(f"hpclaunch: {event.text}", err=True)
    return True
