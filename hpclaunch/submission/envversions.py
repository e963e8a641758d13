"""Before queueing: the job's Python environment holds what the job needs (JobSpec.requires), read from its package
metadata where the login node sees the environment, without running or importing anything.

Where the environment lives: `python.venv`, an absolute `python.conda_env` path, or an absolute
`python.executable` (its prefix). Its `lib/python3*/site-packages/NAME-VERSION.dist-info` folders give each
package's version, as `importlib.metadata` reads them in the job. A package older than the floor refuses the
submit with the package, the version found, the one needed and the fix (the job would stop at its first rank,
after the queue wait); a package that is missing, or an environment this machine cannot see (a module's python,
a conda env by name, a path on a filesystem only the nodes mount), is left to the job, which checks again on each
node before its ranks start (hpclaunch/runtime/node/rank_exec.py). Standard library only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.requirements import FLOORS, version_tuple

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

_DIST_INFO = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)\.dist-info$")


def prefix(spec: JobSpec) -> tuple[Path, str] | None:
    """The environment's prefix as this machine sees it, and the profile key that names it; None: not visible."""
    py = spec.python_env
    where = f"python_envs.{spec.recipe.python_env}" if spec.recipe.python_env else "python"
    for value, key in ((py.venv, "venv"), (py.conda_env, "conda_env")):
        if value and Path(value).is_absolute():
            return Path(value), f"{where}.{key}"
    exe = Path(py.executable)
    if exe.is_absolute() and exe.parent.name == "bin":
        return exe.parent.parent, f"{where}.executable"
    return None


def versions(root: Path) -> dict[str, str]:
    """{normalized name: version} of the packages installed under `root` (its site-packages' dist-info folders)."""
    found: dict[str, str] = {}
    for site in sorted(root.glob("lib/python3*/site-packages")):
        for entry in site.iterdir():
            m = _DIST_INFO.match(entry.name)
            if m:
                found[_normal(m["name"])] = m["version"]
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def too_old(spec: JobSpec, root: Path) -> list[str]:
    """One line per package the job needs that the environment at `root` holds older than the floor."""
    if not spec.requires or not root.is_dir():
        return []
    have = versions(root)
    return [f"{name} {have[_normal(name)]} (needs >= {floor})" for name, floor in spec.requires.items()
            if _normal(name) in have and version_tuple(have[_normal(name)]) < version_tuple(floor)]


def check(spec: JobSpec) -> None:
    from hpclaunch.errors import ConfigError

    where = prefix(spec)
    old = too_old(spec, where[0]) if where else []
    if not where or not old:
        return
    root, key = where
    what = "recipe " + spec.recipe.name
    needs = " ".join(f"'{name}>={FLOORS.get(name, floor)}'" for name, floor in spec.requires.items()
                     if any(line.startswith(name + " ") for line in old))
    raise ConfigError(
        f"the job's python environment {root} is too old for {what}: {'; '.join(old)}; each rank would stop at "
        "start, after the queue wait", key=f"profile {spec.profile.name} {key}",
        hint=f"upgrade it (`{root}/bin/pip install {needs}`), or choose another environment for this recipe; a "
             "script of your own (`hpclaunch submit train.py`) runs in it as it is")
