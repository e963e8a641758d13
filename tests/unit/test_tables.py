"""print_table and fitted_table: piped, every column as tab-separated text; on a terminal a table no wider than
the window, the id columns whole, the shrink columns cut short first, then headers wrapped, then columns left
out from the right (named under the table)."""

from __future__ import annotations

import pytest
from rich.console import Console

from hpclaunch.cli.tables import fitted_table, print_table

HEADERS = ["name", "scheduler", "partitions", "file"]
ROWS = [["guangzhou-a800", "slurm", "gpu (16x8 A800), debug (2x8 A800)", "/home/me/.config/hpclaunch/a800.yaml"],
        ["a-very-long-profile-name-of-a-site", "local", "local (1x8 cpu)", "/opt/site/profiles/long.yaml"]]
BOXED: dict = {}
COMPACT = {"box": None, "pad_edge": False}


def _shown(table, width: int) -> list[str]:  # noqa: ANN001
    console = Console(width=width, force_terminal=True, no_color=True, record=True)
    console.print(table)
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_piped_it_is_every_column_tab_separated(capsys):
    print_table(["job", "name", "state"], [("1", None, "RUNNING"), ("2", "x y", "")], terminal=["job"],
                ids=("job",), shrink=("name",))
    assert capsys.readouterr().out == "job\tname\tstate\n1\t\tRUNNING\n2\tx y\t\n"


@pytest.mark.parametrize("style", [BOXED, COMPACT])
@pytest.mark.parametrize("width", [160, 80, 60, 40])
def test_it_fits_and_the_names_are_whole(style, width):
    lines = _shown(fitted_table(HEADERS, ROWS, width, ids=("name",), shrink=("partitions", "file"), **style), width)
    assert max(map(len, lines)) <= width, lines
    text = "\n".join(lines)
    assert "guangzhou-a800" in text and "a-very-long-profile-name-of-a-site" in text, text
    if width == 160:
        assert "…" not in text and "not shown" not in text, text


def test_the_long_columns_give_way_first_then_columns_fall_off_the_right():
    lines = _shown(fitted_table(HEADERS, ROWS, 80, ids=("name",), shrink=("partitions", "file"), **COMPACT), 80)
    assert lines[0].split() == HEADERS and "…" in lines[1] and "not shown" not in "\n".join(lines), lines
    lines = _shown(fitted_table(HEADERS, ROWS, 56, ids=("name",), shrink=("partitions", "file"), **COMPACT), 56)
    assert lines[0].split() == ["name", "scheduler", "partitio…"], lines
    assert lines[-1] == "not shown at this width: file", lines
    assert lines[2].split()[:2] == ["a-very-long-profile-name-of-a-site", "local"], lines


def test_headers_wrap_before_a_column_is_left_out():
    rows = [["local-1", "bert-large-wikitext-zero3", "COMPLETED", "0:01", "2.5"]]
    headers = ["job", "name", "state", "elapsed", "last loss"]
    lines = _shown(fitted_table(headers, rows, 60, ids=("job", "name"), **COMPACT), 60)
    assert lines[0].split() == ["last"] and lines[1].split() == ["job", "name", "state", "elapsed", "loss"], lines
    assert lines[2].split() == rows[0], lines


def test_an_id_is_never_cut_nor_left_out_even_where_it_does_not_fit():
    lines = _shown(fitted_table(["job", "state"], [["j" * 30, "RUNNING"]], 20, ids=("job",), **COMPACT), 40)
    assert lines[1] == "j" * 30 and lines[-1] == "not shown at this width: state", lines


def test_markup_in_cells_is_shown_as_written():
    rows = [["model org/tiny@main [config+weights]", "staged"]]
    lines = _shown(fitted_table(["asset", "status"], rows, 60, ids=("asset",), styles={"status": lambda t: "green"}),
                   60)
    assert "model org/tiny@main [config+weights]" in "\n".join(lines), lines
