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
from pathlib import Path

KINDS = ("cluster_profiles", "recipes", "templates")

_PKG = Path(__file__).resolve().parent


def bundled_root() -> Path:
    """The folder holding the bundled cluster_profiles/, recipes/ and templates/."""
    source_tree = _PKG.parent
    if (source_tree / "templates" / "job.sbatch.j2").is_file():
        return source_tree
    return _PKG / "_bundled"


def user_roots() -> list[Path]:
    roots = [Path(p).expanduser() for p in os.environ.get("HPCLAUNCH_PATH", "").split(os.pathsep) if p]
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    roots.append(Path(xdg) / "hpclaunch")
    return roots


def search_dirs(kind: str) -> list[Path]:
    """Existing folders of `kind`, highest precedence first."""
    assert kind in KINDS, kind
    dirs = [root / kind for root in [*user_roots(), bundled_root()]]
    return [d for d in dirs if d.is_dir()]


def hpclaunch_home() -> Path:
    """State folder: run directories and the job registry (``$HPCLAUNCH_HOME``, default ``~/.hpclaunch``)."""
    return Path(os.environ.get("HPCLAUNCH_HOME") or Path.home() / ".hpclaunch").expanduser()
