"""Rule 6: the CLI starts (and renders a dry-run) without importing torch, transformers, deepspeed or
mindspore. Checked in fresh interpreters, the way a user runs `hpclaunch` on a login node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "deepspeed", "mindspore", "datasets", "accelerate")


def _modules_after(code: str, env: dict[str, str]) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.fixture
def env(hpc_home):
    return dict(os.environ)


def test_importing_the_cli_is_light(env):
    loaded = _modules_after("import hpclaunch.cli.main", env)
    assert not loaded & set(HEAVY)
    # commands are imported when they run, not when the CLI starts
    assert "jinja2" not in loaded and "pydantic" not in loaded


def test_every_command_module_is_light(env):
    loaded = _modules_after("from hpclaunch.cli.main import cli\ncli.load_all()", env)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize(
    "recipe, profile",
    [
        ("gpt2", "guangzhou-a800"),
        ("bert_large", "guangzhou-a800"),
        ("mixtral", "musa-s4000"),
        ("allreduce", "local"),
    ],
)
def test_dry_run_imports_no_training_library(env, recipe, profile):
    code = (
        "import sys\nfrom hpclaunch.cli.main import cli\n"
        f"sys.argv = ['hpclaunch', 'submit', {recipe!r}, '--profile', {profile!r}, '--dry-run']\n"
        "try:\n    cli.main(prog_name='hpclaunch')\nexcept SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    loaded = _modules_after(code, env)
    assert "jinja2" in loaded  # it really rendered
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_importtime_of_the_cli_lists_no_training_library(env):
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import hpclaunch.cli.main"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line
    }
    assert "hpclaunch" in imported
    assert not imported & set(HEAVY)
