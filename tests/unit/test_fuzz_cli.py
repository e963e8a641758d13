"""Property tests: hostile profiles, recipes, --set values and layouts through the real CLI
(`submit --dry-run`, CliRunner with catch_exceptions=False). Whatever the input: exit 0 or 2 (never a
traceback), within a deadline (never a hang), and nothing left behind by a refusal (no run directory, no
job record; a dry run records no job either)."""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpclaunch.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
PROFILE = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
RECIPE = yaml.safe_load((FIXTURES / "recipes" / "allreduce" / "recipe.yaml").read_text())

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**20, max_value=10**60),
    st.floats(allow_nan=True, allow_infinity=True), _text,
    st.sampled_from(["1n2g", "2n8g", "0n1g", "01:00:00", "0", "-1", "../x", "~nouser/x", "a\\b", "$(id)", ""]),
)
VALUES = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(_text, inner, max_size=3), max_leaves=8)

PROFILE_KEYS = ["scheduler", "accelerator", "backend", "default_partition", "partitions.local.gpus_per_node",
                "partitions.local.max_nodes", "partitions.local.max_time", "partitions.local.cpus_per_node",
                "partitions.local.gres", "env", "env.X", "python", "python.venv", "python.conda_env", "run_root",
                "defaults.layout", "defaults.time", "assets.store", "sbatch_extra", "modules.load", "templates",
                "watchdog.timeout", "python_envs", "nope"]
RECIPE_KEYS = ["script", "launcher", "task", "layout", "time", "train", "train.lr", "train.micro_batch_size",
               "train.global_batch_size", "train.grad_accum", "presets", "presets.slow", "presets.slow.train",
               "default_preset", "model", "model.override_config", "parallel", "deepspeed", "msrun", "launchers", "env",
               "args", "python_env", "partition", "watchdog.timeout", "name", "unknown"]
SET_KEYS = ["train.lr", "train.max_steps", "train.micro_batch_size", "layout", "time", "script", "name",
            "env.X", "args", "parallel.model_parallel", "model.config.n_layer", "train", "launchers", "bogus.key",
            "1bad", ""]

FUZZ = settings(max_examples=40, deadline=3000, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node = out
    *parents, last = dotted.split(".")
    for p in parents:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[last] = value
    return out


def _run(monkeypatch: pytest.MonkeyPatch, args: list[str], profile: dict | None = None,
         recipe: dict | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        monkeypatch.setenv("HPCLAUNCH_HOME", str(home))
        monkeypatch.setenv("HPCLAUNCH_PATH", str(FIXTURES))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg"))
        monkeypatch.chdir(root)
        if profile is not None:
            (root / "p.yaml").write_text(yaml.safe_dump(profile, allow_unicode=True))
            args = [*args, "--profile", str(root / "p.yaml")]
        else:
            args = [*args, "--profile", "local"]
        if recipe is not None:
            shutil.copytree(FIXTURES / "recipes" / "allreduce", root / "r")
            (root / "r" / "recipe.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True))
            args = [str(root / "r"), *args]
        else:
            args = ["allreduce", *args]
        result = CliRunner().invoke(cli, ["submit", *args, "--dry-run"], catch_exceptions=False)
        assert result.exit_code in (0, 2), (args, result.output)
        assert "Traceback" not in result.output
        runs = [p for p in root.rglob("*") if p.is_dir() and (p / "job.sbatch").is_file() or ".partial" in p.name]
        if result.exit_code == 2:
            assert result.stderr.startswith("hpclaunch: error: "), result.stderr
            assert not runs, f"a refused dry run left {runs}"
        else:
            assert len(runs) == 1, runs
        assert not (home / "registry").exists() or not list((home / "registry").glob("*.json"))


@FUZZ
@given(changes=st.lists(st.tuples(st.sampled_from(PROFILE_KEYS), VALUES), min_size=1, max_size=3))
def test_fuzzed_profiles(monkeypatch, changes):
    profile = PROFILE
    for key, value in changes:
        profile = _set(profile, key, value)
    _run(monkeypatch, [], profile=profile)


@FUZZ
@given(changes=st.lists(st.tuples(st.sampled_from(RECIPE_KEYS), VALUES), min_size=1, max_size=3))
def test_fuzzed_recipes(monkeypatch, changes):
    recipe = RECIPE
    for key, value in changes:
        recipe = _set(recipe, key, value)
    _run(monkeypatch, [], recipe=recipe)


@FUZZ
@given(sets=st.lists(st.tuples(st.sampled_from(SET_KEYS), st.one_of(_text, st.sampled_from(
    ["inf", "nan", "1e999", "9" * 5000, "[1, 2]", "{a: 1}", "&a [*a]", "!!python/object:os.system", "0x10",
     "'", "a: b: c", "- x", "null"]))), max_size=3),
       layout=st.one_of(st.none(), _text, st.from_regex(r"\A[0-9]{1,4}n[0-9]{1,4}g\Z")),
       nodes=st.one_of(st.none(), st.integers(-3, 10**6)))
def test_fuzzed_sets_and_layouts(monkeypatch, sets, layout, nodes):
    args = [f"--set={k}={v}" for k, v in sets]
    if layout is not None:
        args += ["--layout", layout]
    if nodes is not None:
        args += ["--nodes", str(nodes)]
    _run(monkeypatch, args)
