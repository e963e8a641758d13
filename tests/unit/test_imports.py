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
def env(hpc_home, tmp_path):
    # a private, empty cache: every dry-run here really parses and renders (hpclaunch/core/cache.py); a private
    # scratch, so the cluster profiles' asset store is empty: a model config staged in the user's store would make
    # the plan build the model on the meta device, which is allowed to import torch
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "SCRATCH": str(tmp_path / "scratch")}


def test_importing_the_cli_is_light(env):
    loaded = _modules_after("import hpclaunch.cli.main", env)
    assert not loaded & set(HEAVY)
    # commands are imported when they run, not when the CLI starts
    assert "jinja2" not in loaded and "pydantic" not in loaded


def test_every_command_module_is_light(env):
    loaded = _modules_after("from hpclaunch.cli.main import cli\ncli.load_all()", env)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "mcp" not in loaded and "pydantic" not in loaded  # the MCP SDK: only when `hpclaunch mcp` runs
    assert not loaded & {"starlette", "uvicorn"}  # the web view's server: only when `hpclaunch ui` runs


@pytest.mark.parametrize(
    "recipe, profile",
    [
        ("gpt2", "guangzhou-a800"),
        ("bert_large", "guangzhou-a800"),
        ("mixtral", "ascend-910"),
        ("gpt2", "musa-s4000"),
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


def _cli_modules(args: list[str], env: dict[str, str]) -> set[str]:
    code = (
        "import sys\nfrom hpclaunch.cli.main import cli\n"
        f"sys.argv = ['hpclaunch', *{args!r}]\n"
        "try:\n    cli.main(prog_name='hpclaunch')\nexcept SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    return _modules_after(code, env)


def test_status_and_jobs_import_no_config_models_templates_or_yaml(env, hpc_home):
    """`hpclaunch status` and `jobs` read the JSON job records with the standard library: no pydantic,
    Jinja2 or PyYAML (structure, not timing: the timings live in benchmarks/dry_run_vs_torchx.py)."""
    from hpclaunch.state import registry

    run_dir = hpc_home / "runs" / "r1"
    run_dir.mkdir(parents=True)
    registry.add(registry.JobRecord("local-1", "local", "local", "gpt2", None, "torchrun", "1n2g", "gpt2",
                                    str(run_dir), "2026-11-22T07:00:00+0000"))
    for args in (["status", "local-1"], ["status"], ["jobs"], ["jobs", "--json"]):
        loaded = _cli_modules(args, env)
        assert not loaded & {"pydantic", "pydantic_core", "jinja2", "yaml"}, (args, sorted(loaded))
        assert "rich" not in loaded, args  # output is piped here: plain text, no rich


def test_a_dry_run_does_not_import_pydantic(env):
    """The config models are msgspec Structs (hpclaunch/config/base.py): no pydantic on the submit path."""
    args = ["submit", "gpt2", "--profile", "guangzhou-a800", "--layout", "2n8g", "--dry-run"]
    loaded = _cli_modules(args, env)
    assert "jinja2" in loaded and "yaml" in loaded  # it really rendered
    assert "pydantic" not in loaded and "pydantic_core" not in loaded
    # the same dry-run again: parsed YAML and the rendered files come from the cache (hpclaunch/core/cache.py)
    again = _cli_modules(args, env)
    assert not again & {"jinja2", "yaml", "pydantic", "pydantic_core"}, sorted(again)
