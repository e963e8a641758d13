"""Assets inside a job: hub assets from the offline store only, generated `tiny` assets cached there.

    STORE/models/<org>--<name>/<rev>/            staged by `hpclaunch stage-assets` (with its manifest)
    STORE/generated/<kind>/<key>/                built here by rank 0 (tokenizers, tiny models, data)

A generated folder appears under its final name only when complete (built beside it, then renamed),
so a crash leaves no half-built asset and concurrent jobs never read one. With the profile's
``assets.stage: node-local`` each node reads its own verified copy (nodeassets.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.assets.store import MANIFEST, asset_path, store_root
from hpclaunch.config.profile import asset_store
from hpclaunch.errors import AssetError
from hpclaunch.runtime.train import nodeassets

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.runtime.train.distributed import Dist


def job_store(spec: JobSpec) -> Path:
    return store_root(os.environ.get("HPCLAUNCH_ASSET_STORE") or asset_store(spec.profile))


def _stage_hint(spec: JobSpec) -> str:
    preset = f" --preset {shlex.quote(spec.preset)}" if spec.preset else ""
    return (
        f"run `hpclaunch stage-assets {spec.recipe_arg} --profile {spec.profile_arg}{preset}` "
        f"where there is network, then copy the store to the cluster"
    )


def hub_asset(spec: JobSpec, kind: str, repo: str, revision: str = "main") -> Path:
    """The staged folder of a hub asset; an AssetError naming it and the fix when missing or partial."""
    path = asset_path(job_store(spec), kind, repo, revision)
    what = f"{kind} {repo!r} (revision {revision})"
    if not path.is_dir():
        raise AssetError(f"{what} is not staged: {path} does not exist", hint=_stage_hint(spec))
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise AssetError(f"{what} is incomplete: {manifest} is missing", hint=_stage_hint(spec))
    try:
        files = json.loads(manifest.read_text()).get("files", [])
    except (OSError, ValueError) as e:
        raise AssetError(f"{what}: unreadable manifest {manifest}: {e}", hint=_stage_hint(spec)) from e
    for entry in files:
        name = entry.get("path") if isinstance(entry, dict) else entry
        size = entry.get("size") if isinstance(entry, dict) else None
        f = path / str(name)
        if not f.is_file() or (size is not None and f.stat().st_size != size):
            raise AssetError(
                f"{what} is incomplete: {f} is missing or has the wrong size", hint=_stage_hint(spec)
            )
    return nodeassets.local_copy(path, job_store(spec))


def fingerprint(*parts: Any) -> str:
    """A short stable key for generated assets (what they were built from)."""
    # a node-local copy's path counts as the store's: every node computes the same key (assets.stage node-local)
    blob = nodeassets.as_store_path(json.dumps(parts, sort_keys=True, default=str)).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def generated(store: Path, kind: str, key: str, build: Callable[[Path], None], d: Dist) -> Path:
    """STORE/generated/<kind>/<key>, built once by rank 0 (into a temporary folder, then renamed)
    while the other ranks wait at a barrier."""
    final = Path(store) / "generated" / kind / key
    if d.is_main and not final.is_dir():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
        try:
            build(tmp)
            os.replace(tmp, final)  # atomic; if another job won the race, ours is dropped below
        except OSError:
            if not final.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    d.barrier()
    if not final.is_dir():
        raise AssetError(
            f"generated {kind} {final} is missing after rank 0 built it",
            hint="the asset store must be a file system every node shares",
        )
    return nodeassets.local_copy(final, Path(store))
