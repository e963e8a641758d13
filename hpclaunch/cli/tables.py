"""Tables on a terminal (rich), plain tab-separated text when piped; sizes in words."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

import click


def human(n: float) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def surely_not_a_terminal() -> bool:
    """True where rich's Console().is_terminal would be False (output piped or redirected, neither
    TTY_COMPATIBLE nor FORCE_COLOR set), decided without importing rich."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True


def _plain(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    click.echo("\t".join(headers))
    for row in rows:
        click.echo("\t".join("" if c is None else str(c) for c in row))


# how a job state looks on a terminal
STATE_STYLES = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow", "SUBMITTING": "yellow",
                "COMPLETING": "cyan", "SUSPENDED": "yellow", "CANCELLED": "magenta", "UNKNOWN": "dim"}


def state_style(text: str) -> str:
    """The colour of a cell that starts with a job state: failures red."""
    state = text.strip().split(" ", 1)[0]
    return STATE_STYLES.get(state, "red" if state else "")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None, *,
                terminal: Sequence[str] | None = None, shrink: Sequence[str] = (),
                styles: dict[str, Callable[[str], str]] | None = None,
                short: dict[str, Callable[[str], str]] | None = None) -> None:
    """Plain tab-separated text with every column when not on a terminal (for scripts); on a terminal a rich
    table of the `terminal` columns (default: all) that fits the width: the `shrink` columns are cut short
    (…), the others never wrap; `styles`: column -> the style of a cell from its text; `short`: column -> a
    shorter text of a cell for the terminal."""
    if surely_not_a_terminal():
        _plain(headers, rows)  # rich only for a terminal: piped output needs no import of it
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        _plain(headers, rows)
        return
    shown = [headers.index(h) for h in (terminal or headers)]
    compact = {"box": None, "pad_edge": False, "header_style": "bold"} if terminal else {}
    table = Table(title=title, **compact)  # type: ignore[arg-type]
    for i in shown:
        cut = headers[i] in shrink
        table.add_column(headers[i], no_wrap=not cut, overflow="ellipsis" if cut else "fold",
                         min_width=min(8, len(headers[i])) if cut else None)
    for row in rows:
        cells = []
        for i in shown:
            text = "" if row[i] is None else str(row[i])
            text = (short or {}).get(headers[i], str)(text)
            style = (styles or {}).get(headers[i])
            cells.append(f"[{style(text)}]{_escape(text)}[/]" if style and style(text) else _escape(text))
        table.add_row(*cells)
    console.print(table)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
