"""Run directories: made complete or not at all (written beside the final name, then renamed)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.base import replace
from hpclaunch.core.backends import can
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
    if scratch is not None and can(spec.profile.scheduler, "site_scratch") and not os.environ.get("HPCLAUNCH_HOME"):
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


#: The most of an own script's folder a run directory copies (`submit SCRIPT.py`): a folder larger than this is
#: not the script's project (a home folder, a data folder), and the copy would fill the run root with it.
SCRIPT_FOLDER_MAX_BYTES = 100 << 20
SCRIPT_FOLDER_MAX_FILES = 2000
#: Never copied from an own script's folder: version control, virtual environments, Python's caches.
SCRIPT_FOLDER_SKIPS = frozenset({".git", ".hg", ".svn", ".venv", "__pycache__", ".ipynb_checkpoints",
                                 ".mypy_cache", ".pytest_cache", ".ruff_cache"})

#: (the folder to copy, None for all of it or the files of it to copy)
RecipeCopy = tuple[Path, tuple[str, ...] | None]


def recipe_copy(spec: JobSpec) -> RecipeCopy:
    """What the run directory copies as its recipe/: (the recipe folder, None for all of it), or for an ad-hoc
    recipe (`submit SCRIPT.py`) (the script's folder, the files of it to copy: `script_folder`)."""
    folder = Path(spec.recipe_dir)
    return folder, script_folder(folder, spec.recipe.script, spec) if spec.recipe.adhoc else None


def script_folder(folder: Path, script: str, spec: JobSpec) -> tuple[str, ...]:
    """The files of an own script's folder that its run directory copies (relative paths; a linked folder is
    listed, not entered, and kept as a link), so the script finds the files beside it as they were at submit
    (`open("override_config.json")`). Skipped: SCRIPT_FOLDER_SKIPS, *.pyc, the run root. A ConfigError when the
    folder is larger than SCRIPT_FOLDER_MAX_BYTES or SCRIPT_FOLDER_MAX_FILES (the walk stops there)."""
    from hpclaunch.errors import ConfigError

    skip_dirs = {run_root(spec).resolve()}
    found: list[str] = []
    size = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        kept = []
        for name in sorted(dirnames):
            path = here / name
            if name in SCRIPT_FOLDER_SKIPS or path.resolve() in skip_dirs:
                continue
            if path.is_symlink():
                found.append(path.relative_to(folder).as_posix())
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = here / name
            if name.endswith(".pyc") or not path.is_file():  # a broken link has nothing to copy
                continue
            found.append(path.relative_to(folder).as_posix())
            size += path.stat().st_size
        if size > SCRIPT_FOLDER_MAX_BYTES or len(found) > SCRIPT_FOLDER_MAX_FILES:
            what = (f"more than {SCRIPT_FOLDER_MAX_BYTES >> 20} MiB" if size > SCRIPT_FOLDER_MAX_BYTES
                    else f"more than {SCRIPT_FOLDER_MAX_FILES} files")
            raise ConfigError(
                f"the folder of {script}, {folder}, holds {what}: every run directory keeps a copy of the script's "
                "folder, so that the script finds the files beside it as they were when it was submitted",
                hint="put the script and the files it reads in a folder of their own (or make it a recipe folder: "
                     "docs/recipes.md#your-own-script); read large data by absolute path, from scratch or the asset "
                     "store")
    if script not in found:
        found.append(script)
    return tuple(found)


def _copy_recipe(recipe_source: RecipeCopy, target: Path) -> None:
    """The recipe copy of a run directory: the whole recipe folder, or the listed files of a script's folder."""
    folder, only = recipe_source
    if only is None:
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return
    target.mkdir()
    for rel in only:
        src, dst = folder / rel, target / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():  # a linked folder (data on scratch): the same link, absolute, so it holds in the copy
            dst.symlink_to(src.resolve(), target_is_directory=True)
        else:
            shutil.copy2(src, dst)


def write_run_dir(run_dir: Path, files: dict[str, str], recipe_source: RecipeCopy) -> None:
    """Create `run_dir` holding `files`, a copy of the recipe (see `recipe_copy`) and empty logs/ and metrics/."""
    writable_dir(run_dir.parent, "run root")
    partial = run_dir.with_name(f".{run_dir.name}.partial")
    layout = RunFiles(partial)
    try:
        partial.mkdir()
        for name, content in files.items():
            (partial / name).write_text(content, encoding="utf-8")
        layout.script.chmod(0o755)
        _copy_recipe(recipe_source, layout.recipe)
        layout.logs.mkdir()
        layout.metrics.mkdir()
        partial.rename(run_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def write_sweep_dir(sweep_dir: Path, files: dict[str, str],
                    elements: list[tuple[Path, dict[str, str], RecipeCopy]]) -> None:
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
