"""`hpclaunch assets import`: files a user downloaded by hand (or copied from another cluster) enter the
store as if staged: copied into a staging folder beside the final one, hashed (sha256) while copied, given
a manifest that says which model parts or dataset configs they hold, and renamed into place under the
store's lock (hpclaunch/assets/store.py). Preflight and `assets verify` then treat them like staged assets.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hpclaunch.assets.requests import PARTS, check_repo, select_files
from hpclaunch.assets.store import (
    MANIFEST,
    STAGING_PREFIX,
    FileEntry,
    Manifest,
    asset_path,
    locked,
    publish,
    staging_path,
    write_manifest,
)
from hpclaunch.errors import ConfigError

_CHUNK = 8 << 20
#: Files never imported: hpclaunch's own bookkeeping and the hub cache's lock/metadata folders.
_SKIP_NAMES = {MANIFEST, ".gitattributes"}
_SKIP_DIRS = {".cache", ".git", ".huggingface"}


@dataclass(frozen=True)
class Imported:
    manifest: Manifest
    path: Path


def source_files(source: Path) -> dict[str, Path]:
    """Repo path -> file, for a folder (its files, at their relative paths; links followed) or one file."""
    if source.is_file():
        return {source.name: source}
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(source, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(STAGING_PREFIX))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name in _SKIP_NAMES or name.startswith(".lock-") or not path.is_file():
                continue
            found[path.relative_to(source).as_posix()] = path
    return found


def contents(kind: str, paths: list[str]) -> tuple[list[str], list[str]]:
    """(model parts, dataset configs) that these files provide, judged as staging chooses files."""
    if kind == "model":
        parts = []
        for part in PARTS:
            chosen, problems = select_files("model", paths, [part])
            if chosen and not problems:
                parts.append(part)
        return parts, []
    tops = {p.split("/")[0] for p in paths if p.endswith(".parquet") and "/" in p and p.split("/")[0] != "data"}
    configs = [c for c in ["", *sorted(tops)] if select_files("dataset", paths, configs=[c])[0]]
    return [], configs


def _check_source(source: Path, kind: str, files: dict[str, Path]) -> tuple[list[str], list[str]]:
    if not source.exists():
        raise ConfigError(f"{source} does not exist", hint="pass the folder that holds the downloaded files")
    if not files:
        raise ConfigError(f"{source} holds no files to import", hint="pass the folder that holds the downloaded files")
    parts, configs = contents(kind, sorted(files))
    if kind == "model" and not parts:
        raise ConfigError(f"{source} holds no model files (config.json, *.safetensors or pytorch_model*.bin, "
                          "tokenizer files) at its top level", hint="pass the model's own folder")
    if kind == "dataset" and not configs:
        raise ConfigError(f"{source} holds no parquet files", hint="a dataset is imported as parquet files: "
                          "at the top level or under data/ (the default config) or under CONFIG/")
    return parts, configs


def _copy(src: Path, dst: Path) -> FileEntry:
    dst.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            h.update(chunk)
            fout.write(chunk)
    st = dst.stat()
    return FileEntry(path="", size=st.st_size, sha256=h.hexdigest(), mtime_ns=st.st_mtime_ns)


def import_asset(source: Path, store: Path, kind: str, repo_id: str, revision: str = "main") -> Imported:
    """Copy the files of `source` into the store as `kind` `repo_id`@`revision`, with a manifest.

    Bad input (a missing or empty source, files that make no model or dataset, a bad repo id) is a
    ConfigError before anything is written. An asset already in the store is replaced only when complete."""
    check_repo(repo_id, f"--{kind}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+/-]*", revision) or ".." in revision:
        raise ConfigError(f"{revision!r} is not a revision such as main, v1.0 or a commit", key="--revision")
    source = source.expanduser()
    files = source_files(source) if source.exists() else {}
    parts, configs = _check_source(source, kind, files)
    final = asset_path(store, kind, repo_id, revision)
    staging = staging_path(final)
    with locked(final):
        shutil.rmtree(staging, ignore_errors=True)
        try:
            entries = []
            for rel, src in sorted(files.items()):
                entry = _copy(src, staging / rel)
                entry.path = rel
                entries.append(entry)
            commit = revision if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision) else ""
            manifest = Manifest(repo_id=repo_id, kind=kind, revision=revision, commit=commit,
                                endpoint=f"imported from {source.resolve()}",
                                staged_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                parts=parts, configs=configs, files=entries)
            write_manifest(staging, manifest)
            publish(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return Imported(manifest, final)
