"""Shared test fixtures. Keep them simple; every helper's tests may use them.

Fixtures
--------
``hpc_home``   A fresh ``$HPCLAUNCH_HOME`` under ``tmp_path`` (returned as a Path), with
               ``$HPCLAUNCH_PATH`` set to ``tests/fixtures/`` (so the test recipes in
               ``tests/fixtures/recipes/`` are found by name: ``allreduce``, ``allreduce_ds``) and
               ``$XDG_CONFIG_HOME`` pointed into ``tmp_path`` (no user config leaks in).
               Run directories land in ``hpc_home / "runs"``, job records in ``hpc_home / "registry"``.
``hpclaunch``  Runs the CLI in-process with click's CliRunner: ``hpclaunch("submit", "allreduce",
               "--profile", "local", "--dry-run")`` returns a ``click.testing.Result`` with
               ``.exit_code``, ``.stdout``, ``.stderr`` and ``.output`` (both). Uses ``hpc_home``.
               Exceptions that are not HpclaunchErrors propagate (``catch_exceptions=False``), so a
               traceback fails the test instead of hiding in ``result.exception``.

Constants: ``REPO`` (the repository root) and ``TESTS`` (this folder), importable as
``from tests.conftest import REPO`` only when run from the repo root; prefer ``Path(__file__)``.

Markers
-------
``@pytest.mark.slurm``  needs the dev Slurm cluster (``scripts/dev-cluster.sh up``); skipped when
                        ``sinfo`` fails or is missing.
``@pytest.mark.slow``   trains real models (minutes on 2 cores).
``@pytest.mark.gpu``    needs an NVIDIA GPU; the only tests allowed to skip under strict skips.

Order: the test files run longest first (their seconds in ``tests/durations.json``; a file not listed counts
``UNKNOWN_FILE_S``), so that on xdist workers (``scripts/test.sh`` runs ``-n 4 --dist loadfile``: each file on one
worker, its module fixtures made once) no long file starts last. ``HPCLAUNCH_RECORD_DURATIONS=1`` writes that file
anew from the run (docs/testing.md#how-the-suite-runs-in-parallel).

Strict skips: with ``HPCLAUNCH_STRICT_SKIPS=1`` (``scripts/test.sh`` and CI set it) a test that skips
fails the run, with its reason listed, unless it is marked ``gpu``: every test that can run here must run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"


@lru_cache(maxsize=1)
def slurm_available() -> bool:
    """True when `sinfo` runs and answers (the dev cluster or a real one is up)."""
    if shutil.which("sinfo") is None:
        return False
    try:
        proc = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


DURATIONS = TESTS / "durations.json"
UNKNOWN_FILE_S = 30.0


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: the files with the most recorded seconds first, each file's tests together and in
    their own order (a stable sort)."""
    try:
        seconds = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        seconds = {}
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(_file_of(item.nodeid), i)
    items.sort(key=lambda item: (-float(seconds.get(_file_of(item.nodeid), UNKNOWN_FILE_S)),
                                 first_seen[_file_of(item.nodeid)]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _longest_files_first(items)
    if not any(item.get_closest_marker("slurm") for item in items):
        return
    if slurm_available():
        return
    skip = pytest.mark.skip(reason="no Slurm cluster (sinfo failed): run scripts/dev-cluster.sh up")
    for item in items:
        if item.get_closest_marker("slurm"):
            item.add_marker(skip)


_UNEXPECTED_SKIPS: list[tuple[str, str]] = []


def _strict_skips() -> bool:
    return os.environ.get("HPCLAUNCH_STRICT_SKIPS") == "1"


_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # set-up, call and tear-down of each test, by file (on xdist's controller: every worker's reports come here)
    _FILE_SECONDS[_file_of(report.nodeid)] = _FILE_SECONDS.get(_file_of(report.nodeid), 0.0) + report.duration
    if not (_strict_skips() and report.skipped) or "gpu" in report.keywords:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    _UNEXPECTED_SKIPS.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("HPCLAUNCH_RECORD_DURATIONS") == "1" and _FILE_SECONDS and not hasattr(session.config,
                                                                                            "workerinput"):
        try:  # a run of some files updates theirs
            recorded = json.loads(DURATIONS.read_text())
        except (OSError, ValueError):
            recorded = {}
        recorded.update((f, round(s, 1)) for f, s in _FILE_SECONDS.items())
        recorded = dict(sorted(recorded.items(), key=lambda fs: -fs[1]))
        DURATIONS.write_text(json.dumps(recorded, indent=1) + "\n")
    if _UNEXPECTED_SKIPS and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _UNEXPECTED_SKIPS:
        return
    terminalreporter.section("tests that should have run but skipped (HPCLAUNCH_STRICT_SKIPS=1)", red=True)
    for nodeid, reason in _UNEXPECTED_SKIPS:
        terminalreporter.line(f"{nodeid}: {reason}")
    terminalreporter.line("set up what is missing (scripts/test.sh does) or mark a GPU-only test @pytest.mark.gpu")


@pytest.fixture
def hpc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hpclaunch-home"
    home.mkdir()
    monkeypatch.setenv("HPCLAUNCH_HOME", str(home))
    monkeypatch.setenv("HPCLAUNCH_PATH", str(FIXTURES))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return home


@pytest.fixture
def hpclaunch(hpc_home: Path) -> Callable[..., Result]:
    from hpclaunch.cli.main import cli

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False, prog_name="hpclaunch")

    return invoke
