"""Run directories: made complete or not at all (written beside the final name, then renamed)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.base import replace
from hpclaunch.core.paths import expand, hpclaunch_home, scratch_root, writable_dir
from hpclaunch.state.runfiles import SWEEP_SCRIPT, RunFiles, SweepFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec


def run_root(spec: JobSpec) -> Path:
    """Absolute (a relative run_root is taken from the current folder at submit time): the profile's run_root;
    else $HPCLAUNCH_HOME/runs where that is set; else, for a cluster job, the site's scratch ($SCRATCH, ...,
    scratch_root()) when the login node sets one; else ~/.hpclaunch/runs."""
    if spec.profile.run_root:
        return expand(spec.profile.run_root, f"profile {spec.profile.name} run_root")
    scratch = scratch_root()
    if scratch is not None and spec.profile.scheduler != "local" and not os.environ.get("HPCLAUNCH_HOME"):
        return scratch / "runs"
    return hpclaunch_home() / "runs"


def new_run_dir(spec: JobSpec) -> Path:
    """A fresh, unused path: RUN_ROOT/<date>-<time>-<name>-<random>."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return run_root(spec) / f"{stamp}-{spec.name}-{os.urandom(3).hex()}"  # = secrets.token_hex(3)


def new_sweep_dir(spec: JobSpec) -> Path:
    """A fresh, unused path for a sweep folder: RUN_ROOT/<date>-<time>-<name>-sweep-<random>."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return run_root(spec) / f"{stamp}-{spec.name}-sweep-{os.urandom(3).hex()}"


def with_recipe_copy(spec: JobSpec, run_dir: Path) -> JobSpec:
    """The spec as the job sees it: it runs the recipe copy kept in the run directory."""
    return replace(spec, recipe_dir=str(RunFiles(run_dir).recipe))


def recipe_copy(spec: JobSpec) -> tuple[Path, str | None]:
    """What the run directory copies as its recipe/: (the recipe folder, None for all of it), or for an ad-hoc
    recipe (`submit SCRIPT.py`) (the script's folder, the script alone)."""
    return Path(spec.recipe_dir), spec.recipe.script if spec.recipe.adhoc else None


def write_run_dir(run_dir: Path, files: dict[str, str], recipe_source: tuple[Path, str | None]) -> None:
    """Create `run_dir` holding `files`, a copy of the recipe (see `recipe_copy`) and empty logs/ and metrics/."""
    writable_dir(run_dir.parent, "run root")
    partial = run_dir.with_name(f".{run_dir.name}.partial")
    layout = RunFiles(partial)
    try:
        partial.mkdir()
        for name, content in files.items():
            (partial / name).write_text(content, encoding="utf-8")
        layout.script.chmod(0o755)
        folder, only = recipe_source
        if only is None:
            shutil.copytree(folder, layout.recipe, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            layout.recipe.mkdir()
            shutil.copy2(folder / only, layout.recipe / only)
        layout.logs.mkdir()
        layout.metrics.mkdir()
        partial.rename(run_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def write_sweep_dir(sweep_dir: Path, files: dict[str, str],
                    elements: list[tuple[Path, dict[str, str], tuple[Path, str | None]]]) -> None:
    """Create `sweep_dir` holding `files` (the array script, sweep.json), logs/ and each element's run
    directory (path, files, recipe source) at once: the whole sweep is written beside its final name first."""
    sweep_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = sweep_dir.with_name(f".{sweep_dir.name}.partial")
    try:
        partial.mkdir()
        for name, content in files.items():
            (partial / name).write_text(content, encoding="utf-8")
        (partial / SWEEP_SCRIPT).chmod(0o755)
        SweepFiles(partial).logs.mkdir()
        for run_dir, element_files, recipe_source in elements:
            write_run_dir(partial / run_dir.relative_to(sweep_dir), element_files, recipe_source)
        partial.rename(sweep_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def remove_run_dir(run_dir: Path) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)
