"""Where profiles, recipes and templates are found, and where hpclaunch keeps its state.

Search order (first match wins, so user files take precedence over the bundled ones):

1. each folder in ``$HPCLAUNCH_PATH`` (colon-separated), e.g. a site-wide folder on a cluster;
2. ``$XDG_CONFIG_HOME/hpclaunch`` (default ``~/.config/hpclaunch``);
3. the folders bundled with hpclaunch (the repository's top-level ``cluster_profiles/``,
   ``recipes/`` and ``templates/``, shipped inside the wheel as ``hpclaunch/_bundled/``).

Each search root may hold ``cluster_profiles/``, ``recipes/`` and ``templates/`` subfolders.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

KINDS = ("cluster_profiles", "recipes", "templates")

_PKG = Path(__file__).resolve().parents[1]  # the hpclaunch package folder


def import_root() -> Path:
    """The folder from which `import hpclaunch` finds this very package (a checkout or site-packages)."""
    return _PKG.parent


def bundled_root() -> Path:
    """The folder holding the bundled cluster_profiles/, recipes/ and templates/."""
    source_tree = _PKG.parent
    if (source_tree / "templates" / "job.sbatch.j2").is_file():
        return source_tree
    return _PKG / "_bundled"


_DEFAULTED = re.compile(r"\$\{(\w+):-([^}]*)\}")  # ${VAR:-fallback}, as the shell writes it
_LEFT = re.compile(r"\$(\w+|\{\w+\})")


def expand(text: str, where: str) -> Path:
    """`text` with ``$VARS``, ``${VAR:-fallback}`` and ``~`` expanded, made absolute (against the current folder):
    ``run_root: ${SCRATCH:-$HOME}/hpclaunch/runs`` is on scratch where the site sets $SCRATCH, in the home folder
    elsewhere. A variable that is not set (and has no fallback) or a ``~user`` this machine does not know is a
    ConfigError naming `where` (the variable or the key it came from): a literal ``$SCRATCH`` folder would
    otherwise appear under the current one."""
    from hpclaunch.errors import ConfigError

    text = _DEFAULTED.sub(lambda m: os.environ.get(m.group(1)) or m.group(2), text)
    text = os.path.expandvars(text)
    left = _LEFT.search(text)
    if left:
        name = left.group(1).strip("{}")
        raise ConfigError(f"{text!r}: ${name} is not set here", key=where,
                          hint=f"set {name}, or give a fallback as the shell does: ${{{name}:-/other/path}}")
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~nouser
        raise ConfigError(f"{text!r}: cannot expand the ~ of this path: no such user here", key=where,
                          hint="give an absolute path, or ~/... for your own home folder") from None
    return Path(os.path.abspath(path))


def config_home() -> Path:
    """The user's hpclaunch folder: ``$XDG_CONFIG_HOME/hpclaunch`` (default ``~/.config/hpclaunch``)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "hpclaunch"


def user_roots() -> list[Path]:
    roots = [expand(p, "HPCLAUNCH_PATH") for p in os.environ.get("HPCLAUNCH_PATH", "").split(os.pathsep) if p]
    roots.append(config_home())
    return roots


def search_dirs(kind: str) -> list[Path]:
    """Existing folders of `kind`, highest precedence first."""
    assert kind in KINDS, kind
    dirs = [root / kind for root in [*user_roots(), bundled_root()]]
    return [d for d in dirs if d.is_dir()]


def hpclaunch_home() -> Path:
    """State folder: run directories and the job registry (``$HPCLAUNCH_HOME``, default ``~/.hpclaunch``),
    absolute: a relative ``$HPCLAUNCH_HOME`` is taken from the current folder, once, here (a job runs
    from its run directory, where a relative path would point elsewhere)."""
    from hpclaunch.errors import ConfigError

    home = expand(os.environ.get("HPCLAUNCH_HOME") or "~/.hpclaunch", "HPCLAUNCH_HOME")
    if home.exists() and not home.is_dir():
        raise ConfigError(f"{home} is not a folder", key="HPCLAUNCH_HOME",
                          hint="point HPCLAUNCH_HOME at a folder hpclaunch may write to (default ~/.hpclaunch)")
    return home


def writable_dir(path: Path, what: str) -> Path:
    """Create `path` (and its parents) if needed; a ConfigError saying what and where when it cannot be."""
    from hpclaunch.errors import ConfigError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the {what} {path}: {exc.strerror}",
                          hint="check HPCLAUNCH_HOME (or the profile's run_root): it must be a folder you may "
                               "write to") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"the {what} {path} is not writable",
                          hint="check HPCLAUNCH_HOME (or the profile's run_root): it must be a folder you may "
                               "write to")
    return path


SCRATCH_VARS = ("SCRATCH", "PSCRATCH", "SCRATCHDIR", "WORK")  # what sites call their scratch (NERSC: PSCRATCH)


def scratch_root() -> Path | None:
    """$SCRATCH/hpclaunch (or the first of SCRATCH_VARS set to an absolute path), where run directories of cluster
    jobs go when the profile names no run_root; None where the login node sets none."""
    for var in SCRATCH_VARS:
        value = os.environ.get(var, "")
        if value.startswith("/"):
            return Path(value) / "hpclaunch"
    return None
