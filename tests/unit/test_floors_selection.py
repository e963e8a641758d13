"""The unit tests scripts/test-floors.sh runs at the lowest versions (tests/unit/floors.py): every module the list
names exists (a renamed one would silently leave the floors run), and a module lands there by its imports alone."""

from __future__ import annotations

from pathlib import Path

from tests.unit.floors import LISTED, is_floors_module

UNIT = Path(__file__).resolve().parent


def test_every_listed_module_exists() -> None:
    assert sorted(name for name in LISTED if not (UNIT / name).is_file()) == []


def test_a_module_is_in_by_what_it_imports(tmp_path: Path) -> None:
    cases = {
        "test_a.py": ("from transformers import AutoConfig\n", True),
        "test_b.py": ("def test_x():\n    import rich.table\n", True),  # inside a function counts too
        "test_c.py": ("import yaml\nfrom click.testing import CliRunner\n", False),  # plumbing only
        "test_d.py": ("from hpclaunch.core import cache\n", False),
        "test_e.py": ('import pytest\ntorch = pytest.importorskip("torch")\n', True),  # a guarded import counts
        "test_f.py": ('import pytest\nyaml = pytest.importorskip("yaml")\n', False),
    }
    for name, (source, _) in cases.items():
        (tmp_path / name).write_text(source)
    assert {name: is_floors_module(tmp_path / name) for name in cases} == {n: c[1] for n, c in cases.items()}
