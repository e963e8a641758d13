"""The live `watch` table on a terminal (rich), or plain lines elsewhere: frames from hpclaunch/jobs/watch.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hpclaunch.api.following import COLUMNS, MIN_WIDTH, frame, plain_lines
from hpclaunch.cli.tables import fitted_table, state_style

if TYPE_CHECKING:
    from rich.table import Table

    from hpclaunch.jobs.watch import Row
    from hpclaunch.state.registry import JobRecord


def table(rows: Sequence[Row], title: str, width: int) -> Table:
    """The rich table of a frame, `width` cells wide at most: the job id whole, the state and the loss trend cut
    short first, then the last columns left out; no number is cut."""
    return fitted_table(COLUMNS, [r.cells() for r in rows], width, ids=("job",), shrink=("state", "loss trend"),
                        styles={"state": state_style}, right=("step", "loss", "tok/s", "ETA"), least=MIN_WIDTH,
                        title=title, box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold",
                        title_justify="left")


def run(records: Callable[[], list[JobRecord]], jobs: Sequence[str], *, interval: float, once: bool,
        terminal: bool, echo: Callable[[str], None]) -> None:
    """Refresh every `interval` seconds until Ctrl-C (KeyboardInterrupt propagates to the caller), or until every
    named job has finished; `once`: one frame. On a `terminal` a rich Live table, else plain lines via `echo`."""
    if not terminal:
        while True:
            rows = frame(records(), jobs)
            for line in plain_lines(rows, time.strftime("%H:%M:%S")):
                echo(line)
            if once or (jobs and all(r.finished for r in rows)):
                return
            time.sleep(interval)
    from rich.console import Console
    from rich.live import Live

    def draw() -> tuple[Table, list[Row]]:
        rows = frame(records(), jobs)
        title = f"hpclaunch watch  {time.strftime('%H:%M:%S')}  every {interval:g}s  (Ctrl-C to quit)"
        return table(rows, title, console.width), rows

    console = Console()
    if once:
        console.print(draw()[0])
        return
    first, rows = draw()
    with Live(first, console=console, auto_refresh=False) as live:
        while not (jobs and all(r.finished for r in rows)):
            time.sleep(interval)
            shown, rows = draw()
            live.update(shown, refresh=True)
