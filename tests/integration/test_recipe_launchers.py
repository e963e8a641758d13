"""Nothing that submit accepts fails in the job for a reason submit could have known (DESIGN.md rule 11, issue 34):
every bundled recipe under every launcher on every bundled profile.

The walk: each recipe x launcher x profile through `submit --dry-run` in-process (160 dry runs, 1-3 CPU s), the
launcher switched as a user switches it (`--set launcher=L`, the other launchers' sections dropped; for DeepSpeed
also without the recipe's deepspeed section, the launcher's defaults). Each is accepted, or refused with exit 2, one
`hpclaunch: error:` message and nothing written (a traceback fails the test: the fixture does not catch it). A
launcher outside a recipe's `launchers:` is refused on every profile; the local profile accepts exactly LOCAL.

The runs: each combination the local profile accepts has trained to COMPLETED in some test (tiny preset, CPU
ranks). This file runs the two that no other test runs (2 steps, one job each, ~10 CPU s a job; the whole file
~23 CPU s, 24 s wall on 2 cores): bert_large under torchrun (DDP) and mixtral under deepspeed without its deepspeed
section (the launcher's defaults, ZeRO-2). The others, in LOCAL, are run by:

- gpt2 under torchrun: tests/integration/test_recipes_tiny.py (`gpt2_ddp`, DDP);
- gpt2 under deepspeed: test_recipes_tiny.py's ZeRO-1/2/3 parity runs (its ZeRO-2 run writes the ds_config.json of
  the launcher's defaults: gpt2 has no deepspeed section);
- bert_large and mixtral under deepspeed with their own deepspeed sections (ZeRO-3): test_recipes_tiny.py; bert_large
  without its section trains the same script at ZeRO-2 (its script reads nothing of the section);
- mixtral under torchrun: tests/integration/test_tensor_parallel.py (preset tp1: the tiny model, DDP over 4 ranks);
- gpt_mindspore under msrun: tests/integration/test_msrun_slurm.py (the same launcher and MindSpore venv, on the
  dev Slurm cluster).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
RECIPES = {p.parent.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "recipes").glob("*/recipe.yaml"))}
PROFILES = sorted(p.stem for p in (REPO / "cluster_profiles").glob("*.yaml"))
# (launcher, whether the recipe keeps its deepspeed section): the ways a user runs a recipe under each launcher
WAYS = (("torchrun", False), ("deepspeed", True), ("deepspeed", False), ("msrun", False))
# What the local profile accepts: (recipe, launcher, deepspeed section kept) -> the test file that runs it to the end
# (None: this one)
LOCAL = {
    ("gpt2", "torchrun", False): "test_recipes_tiny.py",
    ("gpt2", "deepspeed", False): "test_recipes_tiny.py",  # no deepspeed section: the launcher's defaults (ZeRO-2)
    ("bert_large", "torchrun", False): None,
    ("bert_large", "deepspeed", True): "test_recipes_tiny.py",
    ("bert_large", "deepspeed", False): "test_recipes_tiny.py",  # the same script as with its section (ZeRO-3)
    ("mixtral", "torchrun", False): "test_tensor_parallel.py",
    ("mixtral", "deepspeed", True): "test_recipes_tiny.py",
    ("mixtral", "deepspeed", False): None,
    ("gpt_mindspore", "msrun", False): "test_msrun_slurm.py",
}
RUNS = sorted(way for way, elsewhere in LOCAL.items() if elsewhere is None)
# 2 steps, each logged, one eval batch, only the final checkpoint
SHORT = ("--set", "train.max_steps=2", "--set", "train.log_every=1", "--set", "train.eval_steps=1",
         "--set", "train.save_every=0")


def _sets(recipe: str, launcher: str, keep_deepspeed: bool) -> tuple[str, ...]:
    """`--set launcher=L` and the other launchers' sections dropped, as a user switches launchers."""
    drop = [s for s in ("deepspeed", "msrun") if s != launcher or (s == "deepspeed" and not keep_deepspeed)]
    return ("--set", f"launcher={launcher}", *(a for s in drop for a in ("--set", f"{s}=null")))


def _distinct(recipe: str, launcher: str, keep_deepspeed: bool) -> tuple[str, str, bool]:
    """A recipe without a deepspeed section runs the same whether the test keeps it or not."""
    return recipe, launcher, keep_deepspeed and "deepspeed" in RECIPES[recipe] and launcher == "deepspeed"


def test_every_recipe_launcher_and_profile_is_accepted_or_refused_clearly(hpclaunch, hpc_home: Path) -> None:
    accepted, problems = set(), []
    runs = hpc_home / "runs"
    for profile in PROFILES:
        for recipe, data in RECIPES.items():
            for launcher, keep in WAYS:
                args = (str(REPO / "recipes" / recipe), "--profile", profile, "--preset", "tiny",
                        *_sets(recipe, launcher, keep))
                before = len(list(runs.iterdir())) if runs.is_dir() else 0
                r = hpclaunch("submit", *args, "--dry-run")
                said = " ".join(r.stderr.split())
                where = f"{profile} {recipe} {launcher}{'' if keep else ' (no deepspeed section)'}: {said[:300]}"
                if r.exit_code == 0:
                    accepted.add((profile, _distinct(recipe, launcher, keep)))
                    if launcher not in data["launchers"]:
                        problems.append(f"accepted outside the recipe's launchers: {where}")
                elif r.exit_code != 2 or not r.stderr.startswith("hpclaunch: error: ") or "Traceback" in r.output:
                    problems.append(f"exit {r.exit_code}, not one clear refusal: {where}")
                elif len(list(runs.iterdir())) != before:
                    problems.append(f"refused, but a run directory was left: {where}")
                elif launcher not in data["launchers"] and f"recipe {recipe}'s script runs under" not in said:
                    problems.append(f"refused, but not for its launchers: {where}")
    assert not problems, "\n".join(problems)
    assert {way for profile, way in accepted if profile == "local"} == set(LOCAL)


def test_refusals_name_the_launcher_and_what_to_do(hpclaunch, hpc_home: Path) -> None:
    r = hpclaunch("submit", str(REPO / "recipes" / "gpt2"), "--profile", "local", "--preset", "tiny",
                  "--set", "launcher=msrun", "--dry-run")
    assert r.exit_code == 2 and r.stderr == (
        "hpclaunch: error: --set launcher=msrun: launcher: recipe gpt2's script runs under torchrun or deepspeed "
        "(launchers in its recipe.yaml), not msrun: choose one of those, or a recipe written for msrun "
        "(`hpclaunch recipes list`)\n")
    r = hpclaunch("submit", str(REPO / "recipes" / "bert_large"), "--profile", "musa-s4000", "--dry-run")
    assert r.exit_code == 2 and "DeepSpeed has no MUSA accelerator" in r.stderr
    assert "its script runs under torchrun too: `--set launcher=torchrun --set deepspeed=null`" in r.stderr
    r = hpclaunch("submit", str(REPO / "recipes" / "gpt2"), "--profile", "local", "--set", "launchers=[msrun]",
                  "--dry-run")
    assert r.exit_code == 2 and "launchers says what the recipe's script runs under" in r.stderr
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


@pytest.fixture(scope="module")
def submit() -> Iterator:
    """`hpclaunch submit ... --follow` in-process, in a home outside pytest's tmp folders (another pytest session on
    this machine may prune those while a job still writes)."""
    from hpclaunch.cli.main import cli

    home = Path(tempfile.mkdtemp(prefix="hpclaunch-launchers-test-", dir="/tmp"))

    def run(recipe: str, launcher: str, keep: bool) -> Path:
        args = ["submit", str(REPO / "recipes" / recipe), "--profile", "local", "--preset", "tiny",
                *_sets(recipe, launcher, keep), *SHORT, "--follow"]
        r = CliRunner().invoke(cli, args, catch_exceptions=False, prog_name="hpclaunch")
        assert r.exit_code == 0, r.output[-3000:]
        return Path(re.search(r"run directory: (\S+)", r.output)[1])

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCLAUNCH_HOME", str(home))
        mp.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
        yield run
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("recipe, launcher, keep", RUNS, ids=[f"{r}-{lau}" for r, lau, _ in RUNS])
def test_what_local_accepts_runs_to_completed(submit, recipe: str, launcher: str, keep: bool) -> None:
    run_dir = submit(recipe, launcher, keep)
    how = "DDP" if launcher == "torchrun" else "DeepSpeed ZeRO-2"  # the launcher's defaults: ZeRO-2
    assert f"2 rank(s) on cpu/gloo, precision fp32, {how}" in (run_dir / "logs" / "rank-0.restart-0.log").read_text()
    for rank in (0, 1):
        lines = (run_dir / "metrics" / f"rank-{rank}.jsonl").read_text().splitlines()
        assert [r["step"] for r in map(json.loads, lines) if r["kind"] == "train"] == [1, 2]
