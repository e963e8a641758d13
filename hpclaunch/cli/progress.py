"""Progress of `stage-assets` on a terminal: rich bars per asset (bytes, rate, ETA), or one line per retry
and failed endpoint on stderr when it is not a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.progress import TaskID

    from hpclaunch.assets.requests import AssetRequest


class Bars:
    """Shows the staging events of `hpclaunch.assets.stage` (pass `event` as `on_event`); nothing when
    disabled (`--json`)."""

    def __init__(self, enabled: bool):
        self.progress = None
        self.tasks: dict[AssetRequest, TaskID] = {}
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            console = Console(stderr=True)
            if console.is_terminal:
                self.progress = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    TimeRemainingColumn(),
                    console=console,
                )

    def __enter__(self) -> Bars:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def event(self, req: AssetRequest, ev: dict) -> None:
        p = self.progress
        if p is None:
            if ev["event"] in ("retry", "endpoint_failed"):
                click.echo(
                    f"  {req.repo_id}: {ev['event']}: {ev.get('path', ev.get('endpoint'))}: "
                    f"{ev.get('error', ev.get('message'))}",
                    err=True,
                )
            return
        if ev["event"] == "plan":
            total = sum(f["size"] for f in ev["files"])
            if req in self.tasks:
                p.update(self.tasks[req], total=total, completed=ev["skipped_bytes"])
            else:
                self.tasks[req] = p.add_task(req.label, total=total, completed=ev["skipped_bytes"])
        elif ev["event"] == "progress" and req in self.tasks:
            p.advance(self.tasks[req], ev["bytes"])
        elif ev["event"] in ("retry", "endpoint_failed"):
            p.console.print(
                f"[yellow]{req.repo_id}: {ev.get('path', ev.get('endpoint'))}: "
                f"{ev.get('error', ev.get('message'))}"
            )
