"""Every package of hpclaunch/ says in its docstring what it may import ("May import: a, b, c."), and what it
imports is within that list (the import graph import-linter builds, TYPE_CHECKING imports left out). So the
architecture written in the code cannot drift from the code; pyproject.toml's contracts check the layers."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest

PACKAGES = ["api", "assets", "cli", "config", "core", "jobs", "launchers", "logs", "mcp", "plan", "report",
            "runtime.node", "runtime.train", "schedulers", "state", "submission", "ui"]
KNOWN = {*PACKAGES, "errors", "runtime"}


@pytest.fixture(scope="module")
def graph() -> Any:
    """import-linter's own graph library (the dev extra; imported here, so that the floors' venv, which has no
    import-linter, still collects this module)."""
    import grimp

    return grimp.build_graph("hpclaunch", include_external_packages=False, exclude_type_checking_imports=True)


def owner(module: str) -> str | None:
    """The package of PACKAGES (or errors) a module of hpclaunch belongs to."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if parts[1] == "runtime" and len(parts) > 2:
        return f"runtime.{parts[2]}"
    return parts[1]


def declared(package: str) -> set[str]:
    """The packages its docstring's "May import:" sentence names (the words before the first period that are
    package names)."""
    doc = importlib.import_module(f"hpclaunch.{package}").__doc__ or ""
    found = re.search(r"May import:(.*?)(?:\.\s|\.$)", doc.replace("\n", " "), re.S)
    assert found, f"hpclaunch/{package.replace('.', '/')}/__init__.py: its docstring has no 'May import: ...' line"
    words = set(re.findall(r"[a-z]+(?:\.[a-z]+)?", found.group(1)))
    return {w.removeprefix("hpclaunch.") for w in words} & KNOWN


def imported(graph: Any, package: str) -> set[str]:
    found = set()
    for module in graph.find_descendants(f"hpclaunch.{package}") | {f"hpclaunch.{package}"}:
        found |= {owner(m) for m in graph.find_modules_directly_imported_by(module)}
    return {o for o in found if o and o != package and not (package.startswith("runtime.") and o == "runtime")}


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_what_its_docstring_allows(graph, package):
    allowed = declared(package)
    assert allowed, package
    assert imported(graph, package) <= allowed, (package, sorted(imported(graph, package) - allowed))


def test_the_check_sees_a_package_that_imports_more_than_it_says(graph):
    # the runtime's node supervision imports logs.diagnose (to blame a node): a list without it is caught
    assert "logs" in imported(graph, "runtime.node") and "logs" in declared("runtime.node")
    assert "api" in imported(graph, "cli") and "submission" not in imported(graph, "cli")
