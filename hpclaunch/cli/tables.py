"""Tables on a terminal (rich), plain tab-separated text when piped; sizes in words."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from hpclaunch.core.units import human

__all__ = ["fitted_table", "human", "print_table", "state_style", "terminal_console"]

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def surely_not_a_terminal() -> bool:
    """True where rich's Console().is_terminal would be False (output piped or redirected, neither
    TTY_COMPATIBLE nor FORCE_COLOR set), decided without importing rich."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True


def terminal_console() -> Console | None:
    """A rich Console where the output is a terminal; None where it is piped or redirected (then rich is not even
    imported when surely_not_a_terminal() can tell)."""
    if surely_not_a_terminal():
        return None
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else None


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
                terminal: Sequence[str] | None = None, ids: Sequence[str] = (), shrink: Sequence[str] = (),
                styles: dict[str, Callable[[str], str]] | None = None,
                short: dict[str, Callable[[str], str]] | None = None) -> None:
    """Plain tab-separated text with every column when not on a terminal (for scripts); on a terminal a rich
    table of the `terminal` columns (default: all) that fits the width, as fitted_table lays it out (`ids`
    whole, `shrink` cut short first), boxed where the box leaves no column out; `short`: column -> a shorter
    text of a cell for the terminal."""
    console = terminal_console()
    if console is None:
        _plain(headers, rows)  # rich only for a terminal: piped output needs no import of it
        return
    names = list(terminal or headers)
    texts = [[(short or {}).get(h, str)("" if row[headers.index(h)] is None else str(row[headers.index(h)]))
              for h in names] for row in rows]
    fit: dict[str, Any] = {"ids": ids, "shrink": shrink, "styles": styles, "title": title}
    unboxed: dict[str, Any] = {"box": None, "pad_edge": False, "header_style": "bold"}
    table = fitted_table(names, texts, console.width, **fit, **(unboxed if terminal else {}))
    if table.caption and not terminal:  # the box lines leave columns out: without them
        table = fitted_table(names, texts, console.width, **fit, **unboxed)
    console.print(table)


def fitted_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, *, ids: Sequence[str] = (),
                 shrink: Sequence[str] = (), styles: dict[str, Callable[[str], str]] | None = None,
                 right: Sequence[str] = (), least: dict[str, int] | None = None, **settings: Any) -> Table:
    """A rich table of `rows` (text) `width` cells wide at most, one line per row. The `ids` columns (names, job
    ids) are always shown whole. Where the table is too wide, first the `shrink` columns (paths, descriptions)
    are cut short (…) down to 8 cells, then the other columns' headers wrap; then columns are left out from the
    right (never an id), named in the caption. `styles`: column -> the style of a cell from its text; `right`:
    right-aligned columns; `least`: column -> its least width (steady across refreshes); `settings`: rich
    Table's (box, padding, title...)."""
    from rich.table import Table

    table = Table(caption_justify="left", **settings)
    least = least or {}
    widths = _fit({h: [row[i] for row in rows] for i, h in enumerate(headers)}, lambda n: _room(table, width, n),
                  ids, shrink, least)
    for h in widths:
        table.add_column(h, width=widths[h], no_wrap=h in ids or h in shrink,
                         overflow="ellipsis" if h in shrink else "fold", justify="right" if h in right else "left")
    kept = [headers.index(h) for h in widths]
    for row in rows:
        table.add_row(*(_styled(row[i], (styles or {}).get(headers[i])) for i in kept))
    if len(kept) < len(headers):
        table.caption = "not shown at this width: " + ", ".join(h for h in headers if h not in widths)
    return table


def _fit(texts: dict[str, list[str]], room: Callable[[int], int], ids: Sequence[str], shrink: Sequence[str],
         least: dict[str, int]) -> dict[str, int]:
    """The width of each column shown (in order), as fitted_table describes; `room(n)`: the cells for text with
    n columns."""
    from rich.cells import cell_len

    kept = list(texts)
    while True:
        natural = {c: max([least.get(c, 0), *map(cell_len, [c, *texts[c]])]) for c in kept}
        floor = {c: natural[c] if c in ids else min(natural[c], 8) if c in shrink else
                 max([*map(cell_len, texts[c]), *map(cell_len, c.split())]) for c in kept}
        widths, budget = dict(natural), room(len(kept))
        for tier in ([c for c in kept if c in shrink], kept):  # cut short, then wrap headers; the widest first
            while sum(widths.values()) > budget and (wide := [c for c in tier if widths[c] > floor[c]]):
                widths[max(wide, key=lambda c: widths[c])] -= 1
        others = [c for c in kept if c not in ids]
        if sum(widths.values()) <= budget or not others:
            return widths
        kept.remove(others[-1])


def _room(table: Table, width: int, n: int) -> int:
    """The cells left for text in `width` once `table`'s padding and lines for n columns are drawn."""
    _, right, _, left = table.padding
    pads = n * (left + right) - (0 if table.pad_edge else left + right)
    lines = n - 1 + (2 if table.show_edge else 0) if table.box else 0
    return width - pads - lines


def _styled(text: str, style: Callable[[str], str] | None) -> str:
    from rich.markup import escape

    return f"[{style(text)}]{escape(text)}[/]" if style and style(text) else escape(text)
