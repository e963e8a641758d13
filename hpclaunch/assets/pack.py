"""Carry staged assets to a cluster reached only by upload: a tar of asset folders with their manifests,
verified (every sha256) when unpacked, and renamed into the store only when complete and intact."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.assets.store import (
    MANIFEST,
    Manifest,
    asset_path,
    check_files,
    publish,
    read_manifest,
    write_manifest,
)
from hpclaunch.core.tarsafe import extract_all
from hpclaunch.errors import AssetError


def pack(store: Path, folders: Sequence[Path], out: Path) -> int:
    """Write `folders` (asset folders inside `store`) to the tar `out`; returns the bytes packed."""
    total = 0
    tmp = out.with_name(f".{out.name}.partial")
    with tarfile.open(tmp, "w") as tar:
        for folder in folders:
            manifest = read_manifest(folder)
            if manifest is None:
                raise AssetError(f"{folder} has no manifest: stage it before packing")
            rel = folder.relative_to(store)
            for entry in manifest.files:
                tar.add(folder / entry.path, arcname=f"{rel}/{entry.path}", recursive=False)
                total += entry.size
            tar.add(folder / MANIFEST, arcname=f"{rel}/{MANIFEST}", recursive=False)
    os.replace(tmp, out)
    return total


@dataclass
class Unpacked:
    manifest: Manifest
    path: Path


def unpack(archive: Path, store: Path) -> list[Unpacked]:
    """Extract beside the store, verify every file of every asset, then rename each into place."""
    if not archive.is_file():
        raise AssetError(f"{archive} does not exist")
    store.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".unpack-", dir=store))
    try:
        try:
            with tarfile.open(archive) as tar:
                extract_all(tar, work)
        except (tarfile.TarError, OSError) as exc:
            raise AssetError(f"cannot read {archive}: {exc}") from None
        done, bad = [], []
        for manifest_file in sorted(work.glob(f"*/*/*/{MANIFEST}")):
            folder = manifest_file.parent
            manifest = read_manifest(folder)
            if manifest is None:
                bad.append(f"{manifest_file.relative_to(work)}: unreadable manifest")
                continue
            problems = check_files(folder, manifest, rehash=True)
            if problems:
                bad += [f"{manifest.repo_id}: {p.path.relative_to(folder)}: {p.what}" for p in problems]
                continue
            for entry in manifest.files:  # mtimes are local bookkeeping for the quick check
                entry.mtime_ns = (folder / entry.path).stat().st_mtime_ns
            write_manifest(folder, manifest)
            final = asset_path(store, manifest.kind, manifest.repo_id, manifest.revision)
            publish(folder, final)
            done.append(Unpacked(manifest, final))
        if bad:
            raise AssetError(
                f"{archive}: {len(bad)} file(s) failed verification and were not unpacked:\n  "
                + "\n  ".join(bad),
                hint="pack the assets again where they were staged",
            )
        if not done:
            raise AssetError(f"{archive} holds no staged assets (no {MANIFEST} found)")
        return done
    finally:
        shutil.rmtree(work, ignore_errors=True)
