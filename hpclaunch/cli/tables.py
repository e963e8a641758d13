"""Tables on a terminal (rich), plain tab-separated text when piped; sizes in words."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click


def human(n: float) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _surely_not_a_terminal() -> bool:
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


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    if _surely_not_a_terminal():
        _plain(headers, rows)  # rich only for a terminal: piped output needs no import of it
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        _plain(headers, rows)
        return
    table = Table(title=title)
    for h in headers:
        table.add_column(h)
    for row in rows:
        table.add_row(*("" if c is None else str(c) for c in row))
    console.print(table)
