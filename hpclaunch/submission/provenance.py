"""``RUN_DIR/provenance.json``: what a run ran with, and reading it back.

`hpclaunch submit` writes the part that only the submitting side knows: the hpclaunch version, the git
state of the ORIGINAL recipe folder (the run directory holds a copy, which is no repository), and the
assets with their revisions and manifest sha256s. The job adds the rest at start
(hpclaunch/runtime/node/provenance.py). `status` shows `summary`, `compare` lists `differences`.
Standard library only: `status` reads it and stays light.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.profile import asset_store
from hpclaunch.core.version import __version__
from hpclaunch.state.provenance import write
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

MAX_DIFF_BYTES = 20_000
def _git(folder: Path, *args: str) -> str | None:
    from hpclaunch.core.cmd import run
    from hpclaunch.errors import CommandError

    try:
        return run(["git", "-C", str(folder), *args], timeout=20).stdout
    except CommandError:
        return None


def recipe_git(folder: Path) -> dict[str, Any] | None:
    """The commit of the repository holding `folder`, whether `folder` has changes against it, and those
    changes when they are small; None when `folder` is in no git repository (or git is missing)."""
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return None
    status = _git(folder, "status", "--porcelain", "--", ".") or ""
    out: dict[str, Any] = {"commit": commit.strip(), "dirty": bool(status.strip())}
    if out["dirty"]:
        diff = _git(folder, "diff", "HEAD", "--", ".") or ""
        untracked = [line[3:] for line in status.splitlines() if line.startswith("??")]
        out["diff_bytes"] = len(diff.encode())
        out["diff"] = diff if len(diff.encode()) < MAX_DIFF_BYTES else None
        if untracked:
            out["untracked"] = untracked
    return out


def _assets(spec: JobSpec) -> list[dict[str, Any]]:
    from hpclaunch.assets.requests import requests_for_spec
    from hpclaunch.assets.store import MANIFEST, asset_path, read_manifest, store_root

    store = store_root(asset_store(spec.profile))
    out = []
    for req in requests_for_spec(spec):
        folder = asset_path(store, req.kind, req.repo_id, req.revision)
        manifest = read_manifest(folder)
        try:
            digest: str | None = hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
        except OSError:
            digest = None
        out.append({"kind": req.kind, "repo_id": req.repo_id, "revision": req.revision,
                    "commit": manifest.commit if manifest else None, "manifest_sha256": digest,
                    "path": str(folder)})
    return out


def submit_part(spec: JobSpec) -> dict[str, Any]:
    """What the submitting side records; `spec` is the spec as resolved (its recipe_dir the original)."""
    source = Path(spec.recipe_dir)
    return {"format": 1, "hpclaunch_version": __version__, "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "recipe": {"name": spec.recipe.name, "source": str(source), "git": recipe_git(source)},
            "assets": _assets(spec)}


def record_submit(spec: JobSpec, run_dir: Path) -> None:
    write(RunFiles(run_dir).provenance, submit_part(spec))
