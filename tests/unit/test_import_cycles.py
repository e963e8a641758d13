"""Contract 6 of docs/architecture.md (no import cycles between the files of a package), with the imports made
only for type annotations counted too. pyproject.toml's contracts leave those out (exclude_type_checking_imports:
the runtime may name a login-side type in an annotation), which let two files import each other when one of them
did it for a type alone; this runs pyproject.toml's acyclic_siblings contract with them in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
[tool.importlinter]
root_package = "hpclaunch"
exclude_type_checking_imports = false

[[tool.importlinter.contracts]]
name = "No import cycles between the files of a package, imports for type annotations included"
type = "acyclic_siblings"
ancestors = ["hpclaunch"]
"""


def test_no_two_files_of_a_package_import_each_other_not_even_for_a_type(tmp_path):
    config = tmp_path / "acyclic.toml"
    config.write_text(CONFIG, encoding="utf-8")
    proc = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), str(config), "--no-cache"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
