"""Ad-hoc recipes: ``hpclaunch submit path/to/train.py --launcher torchrun -- ARGS`` runs a user's own script
without a recipe folder. The recipe is made here (name from the file stem, ``adhoc: true``) and then goes
through resolve like any recipe read from a recipe.yaml; the run directory keeps a copy of the script's folder
(hpclaunch/submission/rundir.py `script_folder`), in which the ranks run (hpclaunch/launchers/base.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from hpclaunch.config.loader import RecipeSource
from hpclaunch.errors import ConfigError

SCRIPT_SUFFIX = ".py"
DEFAULT_LAUNCHER = "torchrun"
#: the launchers that run a plain Python script (msrun runs MindSpore recipes through their own worker)
SCRIPT_LAUNCHERS = ("torchrun", "deepspeed")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.+-]+")


def is_script(ref: str) -> bool:
    """Whether `ref` names a Python script (an ad-hoc recipe) rather than a recipe or a resolved.yaml."""
    return ref.endswith(SCRIPT_SUFFIX)


def recipe_name(script: Path) -> str:
    """The file stem, made a valid job name (letters, digits and _ . + -)."""
    return _NOT_IN_NAME.sub("_", script.stem).strip("_")[:128] or "script"


def script_source(ref: str, launcher: str | None) -> RecipeSource:
    """The ad-hoc recipe of the script `ref`, as resolve reads a recipe.yaml."""
    from hpclaunch.core.paths import expand

    launcher = launcher or DEFAULT_LAUNCHER
    if launcher not in SCRIPT_LAUNCHERS:
        raise ConfigError(f"--launcher {launcher}: a script runs under {' or '.join(SCRIPT_LAUNCHERS)}",
                          key="--launcher", hint="msrun runs MindSpore recipes: write a recipe folder for it "
                                                 "(docs/recipes.md), or choose torchrun or deepspeed")
    path = expand(ref, "script")
    if not is_script(ref):
        raise ConfigError(f"{ref} is not a Python script (.py)", key="--launcher",
                          hint="give a .py file, or leave out --launcher for a recipe folder or resolved.yaml")
    if not path.is_file():
        raise ConfigError(f"no such script: {path}", hint="check the path of the Python script to run")
    path = path.resolve()
    data = {"name": recipe_name(path), "description": f"ad-hoc recipe of {path}", "script": path.name,
            "launcher": launcher, "adhoc": True}
    return RecipeSource(dir=path.parent, file=path, data=data)
