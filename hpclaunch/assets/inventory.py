"""What a store holds (`assets list`) and whether it is intact (`assets verify`), as data."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpclaunch.assets.store import Manifest, check_files, iter_assets, refresh_mtimes, store_root
from hpclaunch.config.profile import asset_store
from hpclaunch.errors import AssetError


def profile_store(profile: str) -> Path:
    """The asset store of a cluster profile (name or YAML file)."""
    from hpclaunch.config.loader import load_profile

    return store_root(asset_store(load_profile(profile)))


def list_assets(store: Path) -> list[dict[str, Any]]:
    """One entry per asset folder: its manifest's facts and state "staged", or only its path and state
    "no manifest (incomplete)"."""
    items: list[dict[str, Any]] = []
    for folder, m in iter_assets(store):
        if m is None:
            items.append({"path": str(folder), "state": "no manifest (incomplete)"})
            continue
        items.append({"kind": m.kind, "repo_id": m.repo_id, "revision": m.revision, "commit": m.commit,
                      "parts": m.parts, "configs": m.configs, "files": len(m.files), "bytes": m.total_bytes,
                      "endpoint": m.endpoint, "staged_at": m.staged_at, "path": str(folder), "state": "staged"})
    return items


@dataclass(frozen=True)
class AssetCheck:
    """One asset folder after rehashing every file: `problems` name each missing or corrupt file."""

    path: Path
    manifest: Manifest | None  # None: the folder has no manifest (an incomplete asset)
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.manifest is not None and not self.problems

    def messages(self) -> list[str]:
        return [f"{self.path}: no manifest (incomplete asset)"] if self.manifest is None else list(self.problems)

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        if m is None:
            return {"path": str(self.path), "ok": False, "problems": ["no manifest"]}
        return {"repo_id": m.repo_id, "kind": m.kind, "path": str(self.path), "files": len(m.files),
                "ok": self.ok, "problems": list(self.problems)}


def verify_store(store: Path) -> Iterator[AssetCheck]:
    """Rehash every asset of `store`, one at a time. An intact asset's mtimes are refreshed, so that a
    store copied without them is trusted again by size + mtime."""
    for folder, m in iter_assets(store):
        if m is None:
            yield AssetCheck(folder, None)
            continue
        problems = check_files(folder, m, rehash=True)
        if not problems:
            refresh_mtimes(folder, m)
        yield AssetCheck(folder, m, tuple(str(p) for p in problems))


def raise_for_problems(store: Path, checks: Iterable[AssetCheck], profile: str) -> None:
    """AssetError listing every problem that `verify_store` found, if any, with the `stage-assets` command that
    fetches the bad files again (`profile`: the --profile as given)."""
    checks = list(checks)
    bad = [msg for check in checks for msg in check.messages()]
    if not bad:
        return
    args = dict.fromkeys(arg for c in checks if c.manifest is not None and c.problems
                         for arg in _stage_args(c.manifest))
    hint = "stage the assets again with `hpclaunch stage-assets` (only bad files are fetched)"
    if args:
        hint = (f"stage them again: hpclaunch stage-assets {' '.join(args)} --profile {shlex.quote(profile)} "
                "(only bad files are fetched)")
    raise AssetError(f"{len(bad)} problem(s) in the asset store {store}:\n  " + "\n  ".join(bad), hint=hint)


def _stage_args(m: Manifest) -> list[str]:
    """The --model / --dataset arguments of `stage-assets` that stage the asset of manifest `m` again."""
    rev = "" if m.revision == "main" else f"@{m.revision}"
    if m.kind == "model":
        return [f"--model {shlex.quote(m.repo_id + rev)}"]
    return [f"--dataset {shlex.quote(m.repo_id + (f':{c}' if c else '') + rev)}" for c in m.configs or [""]]
