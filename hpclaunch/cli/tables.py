"""Tables on a terminal (rich), plain tab-separated text when piped; sizes in words."""

from __future__ import annotations

from collections.abc import Sequence

import click


def human(n: float) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        click.echo("\t".join(headers))
        for row in rows:
            click.echo("\t".join("" if c is None else str(c) for c in row))
        return
    table = Table(title=title)
    for h in headers:
        table.add_column(h)
    for row in rows:
        table.add_row(*("" if c is None else str(c) for c in row))
    console.print(table)
