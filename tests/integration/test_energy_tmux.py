"""`hpclaunch report SWEEP`'s energy table and `report JOB`'s energy rows as a person sees them: typed into a tmux
pane 80 and 60 columns wide (tests/integration/test_tables_tmux.py's way). Every element's job id is on the screen
whole, the total row too, and no line of the table is wider than the pane."""

from __future__ import annotations

import re

import pytest

from tests.integration.test_tables_tmux import _assert_whole, _screen
from tests.unit.test_energy import _priced_profile, make_sweep

pytestmark = pytest.mark.usefixtures("tmux")


@pytest.fixture
def tmux() -> None:
    import shutil

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")


@pytest.mark.parametrize("width", [80, 60])
def test_a_sweeps_energy_table_reads_at_the_width(hpc_home, hpclaunch, monkeypatch, width):
    _priced_profile(hpc_home, 2.5)
    sweep, ids = make_sweep(hpclaunch, monkeypatch, hpc_home)
    screen = _screen(f"report {sweep}", width)
    table = screen[screen.rindex("\n", 0, screen.index("device-hours")) + 1:screen.index("wrote ")]
    _assert_whole(table, [*ids, "total", "not known"], width)
    assert re.search(r"\bjob\W+device-hours\W+energy\W+cost\b", table), screen
    assert re.search(rf"\b{ids[0]}\W+[\d.e-]+\W+[\d.e-]+ kWh\W+[\d.e-]+\b", table), screen

    one = _screen(f"report {ids[0]}", width)
    for row in ("device-hours: ", "energy: ", "cost: "):
        line = next(x for x in one.splitlines() if x.startswith(row))
        assert len(line) <= 80, line
