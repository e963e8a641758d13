"""Printing a followed job (`submit --follow`, `logs -f`): what hpclaunch.logs.follow yields, and Ctrl-C."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from hpclaunch.api.following import End, Event, Line, Restart, State

if TYPE_CHECKING:
    from hpclaunch.api import JobStatus

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


class StatusLine:
    """On a terminal, the job's progress (step / max, loss, tokens/s, ETA: hpclaunch.jobs.watch.progress_text) kept
    as the last line under the streamed ones: cleared before each line is printed, drawn again after it (read
    from the metrics at most once per `interval` seconds). Nothing when stdout or `stream` is not a terminal,
    so a pipe or a log file gets the lines alone."""

    def __init__(self, run_dir: Path, stream: TextIO | None = None, interval: float = 1.0) -> None:
        self.run_dir, self.stream, self.interval = run_dir, stream or sys.stderr, interval
        self.enabled = self.stream.isatty() and sys.stdout.isatty()
        self.text, self.shown, self.read_at = "", False, 0.0

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    def draw(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.read_at >= self.interval:
            from hpclaunch.api.following import progress

            self.text, self.read_at = progress(self.run_dir), now
        if self.text and not self.shown:
            width = shutil.get_terminal_size((80, 24)).columns - 1
            self.stream.write(f"\x1b[2m{self.text[:width]}\x1b[0m")
            self.stream.flush()
            self.shown = True


def print_followed(job_id: str, events: Iterator[Event], emit: Callable[[Line], None], *,
                   restarts: bool = True, status: StatusLine | None = None) -> JobStatus | None:
    """Print each line through `emit` (and `==> restart N <==` when a new restart starts); return the job's
    final status. While the job is queued, say why on stderr, again each time the reason changes, and when
    it starts; while it runs, keep `status` (a terminal's progress line) under the lines. Ctrl-C stops the
    following, not the job: say so and how to re-attach or cancel, exit 130."""
    queued = False
    line = status or _NoStatus()
    try:
        for event in events:
            line.clear()
            if isinstance(event, Line):
                emit(event)
            elif isinstance(event, State):
                queued = _say_state(event, queued)
            elif isinstance(event, Restart) and restarts:
                click.echo(f"==> restart {event.restart} <==")
            elif isinstance(event, End):
                return event.status
            line.draw()
    except KeyboardInterrupt:
        line.clear()
        click.echo(f"\nhpclaunch: stopped following job {job_id}; the job still runs.\n"
                   f"  re-attach: hpclaunch logs {job_id} -f\n"
                   f"  cancel it: hpclaunch cancel {job_id}", err=True)
        raise click.exceptions.Exit(INTERRUPTED) from None
    return None


def follow_to_end(job_id: str, run_dir: Path) -> None:
    """Stream the job script's output until the job ends (on a terminal with the progress line under it);
    exit 1 unless it COMPLETED (`submit --follow`, `resume --follow`)."""
    from hpclaunch import api
    from hpclaunch.api.following import follow
    from hpclaunch.errors import JobFailed

    record, _ = api.record_of(job_id)
    if record.remote:  # submitted over SSH: its output streamed from the login node
        status = print_followed(job_id, follow(job_id), lambda line: click.echo(
            line.text if line.rank is None else f"[rank{line.rank}]: {line.text}"))
    else:
        events = follow(job_id, output_only=True)
        status = print_followed(job_id, events, lambda line: click.echo(line.text), status=StatusLine(run_dir))
    if status is None:
        return
    click.echo(f"job {job_id} {status.state}" + (f" (exit {status.exit_code})" if status.exit_code else ""),
               err=True)
    if status.state != "COMPLETED":
        raise JobFailed(f"job {job_id} ended {status.state}", hint=f"hpclaunch logs {job_id} --diagnose")


class _NoStatus:
    def clear(self) -> None:
        pass

    def draw(self) -> None:
        pass


def _say_state(event: State, queued: bool) -> bool:
    """Print a state change on stderr: every one while queued, and the start of a job that was queued (a job
    found running needs no word). Returns whether the job is (or was) queued."""
    if event.status.state == "RUNNING" and not queued:
        return False
    click.echo(f"hpclaunch: {event.text}", err=True)
    return True
