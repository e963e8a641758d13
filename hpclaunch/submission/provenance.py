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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.core.version import __version__
from hpclaunch.state.provenance import read, write
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

MAX_DIFF_BYTES = 20_000
# differ between any two runs and say nothing about what they ran with
_PER_RUN = {"submitted_at", "job.job_id", "job.restart", "job.started_at", "recipe.source"}
_PER_RUN_ENV = {"HPCLAUNCH_JOB_ID", "HPCLAUNCH_RUN_DIR", "HPCLAUNCH_CONFIG", "HPCLAUNCH_LOG_DIR", "HPCLAUNCH_RESTART",
                "MASTER_PORT", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_TASK_PID", "SLURM_ARRAY_JOB_ID",
                "SLURM_ARRAY_TASK_ID", "SLURM_SUBMIT_DIR", "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME",
                "SLURM_RESTART_COUNT", "SLURM_JOB_NAME"}


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

    store = store_root(spec.profile.assets.store)
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


def load(run_dir: Path) -> dict[str, Any]:
    """A run's provenance ({} when it has none yet)."""
    return read(RunFiles(run_dir).provenance)


def summary(p: Mapping[str, Any]) -> str | None:
    """One line: version, recipe commit, Python and a few key packages, modules, nodes, devices, assets."""
    if not p:
        return None
    parts = [f"hpclaunch {p.get('hpclaunch_version', '?')}"]
    git = (p.get("recipe") or {}).get("git")
    if git:
        parts.append(f"recipe {str(git.get('commit', ''))[:10]}{' (dirty)' if git.get('dirty') else ''}")
    elif "recipe" in p:
        parts.append("recipe not in git")
    pkgs = p.get("packages")
    if isinstance(pkgs, dict):
        lowered = {k.lower(): v for k, v in pkgs.items()}
        key = [f"{n} {lowered[n]}" for n in ("torch", "transformers", "deepspeed", "mindspore") if n in lowered]
        parts.append(f"python {(p.get('job') or {}).get('python', '?')}, {len(pkgs)} packages"
                     + (f" ({', '.join(key)})" if key else ""))
    mods = (p.get("modules") or {}).get("loaded")
    if mods is not None:
        parts.append(f"modules {' '.join(mods)}" if mods else "no modules")
    dev = p.get("devices")
    if isinstance(dev, dict):
        parts.append(f"{dev.get('count')} x {'/'.join(dev.get('models') or [])} (driver {dev.get('driver')})"
                     if dev.get("tool") and dev.get("count") else "no accelerator (CPU)")
    if "nodes" in p:
        parts.append(f"nodes {(p.get('nodes') or {}).get('nodelist')}")
    if p.get("assets"):
        parts.append(f"{len(p['assets'])} asset(s)")
    if "packages" not in p:
        parts.append("job part not written yet")
    return "; ".join(parts)


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "repo_id" in v for v in value):
        for v in value:  # assets: by kind and repo, not by position
            yield from _flat(v, f"{prefix}.{v.get('kind')}:{v.get('repo_id')}")
    else:
        yield prefix, value


def _per_run(key: str) -> bool:
    if key in _PER_RUN or key.endswith(".path"):
        return True
    return key.startswith("env.") and key[4:] in _PER_RUN_ENV


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted key, value in a, value in b) for everything that differs, per-run values (ids, times, the run
    directory) left out; None stands for absent."""
    fa, fb = dict(_flat(dict(a))), dict(_flat(dict(b)))
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))
            if not _per_run(k) and fa.get(k) != fb.get(k)]
