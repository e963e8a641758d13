"""`hpclaunch assets import`: files a user downloaded by hand (or copied from another cluster) enter the
store as if staged: copied into a staging folder beside the final one, hashed (sha256) while copied, given
a manifest that says which model parts or dataset configs they hold, and renamed into place under the
store's lock (hpclaunch/assets/store.py). Preflight and `assets verify` then treat them like staged assets.

An import replaces the parts (model) or configs (dataset) it brings and keeps the others already in the store: the
seed-002 layout (./model with config.json and the weights, ./tokenizer with tokenizer.json and vocab.txt) imported
as the same model id gives one folder with all three parts, as the hub has them. A tokenizer whose files do not name
its special tokens gets the tokenizer_config.json that does (tokenizer_files.py), said in `Imported.notes`. A
dataset imported as `REPO:CONFIG` goes under CONFIG/, where a recipe's dataset.name finds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hpclaunch.assets.requests import (
    CONFIG_FILES,
    PARTS,
    PT_BIN,
    SAFETENSORS,
    TOKENIZER_FILES,
    check_repo,
    select_files,
)
from hpclaunch.assets.store import (
    MANIFEST,
    STAGING_PREFIX,
    FileEntry,
    Manifest,
    asset_path,
    check_files,
    locked,
    publish,
    read_manifest,
    staging_path,
    write_manifest,
)
from hpclaunch.assets.tokenizer_files import CONFIG as TOKENIZER_CONFIG
from hpclaunch.assets.tokenizer_files import completed_config, read_tokenizer
from hpclaunch.errors import ConfigError

_CHUNK = 8 << 20
#: Files never imported: hpclaunch's own bookkeeping and the hub cache's lock/metadata folders.
_SKIP_NAMES = {MANIFEST, ".gitattributes"}
_SKIP_DIRS = {".cache", ".git", ".huggingface"}


@dataclass(frozen=True)
class Imported:
    manifest: Manifest
    path: Path
    copied: int = 0  # files copied from the source (the manifest also lists those kept and written)
    kept: tuple[str, ...] = ()  # parts or configs already in the store that the import kept
    notes: tuple[str, ...] = ()  # what the import wrote besides the files (a tokenizer_config.json)


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


def part_of(path: str) -> str:
    """The model part a repo file belongs to ("" for none: a README), as staging chooses files."""
    if "/" in path:
        return ""
    if path in CONFIG_FILES:
        return "config"
    if SAFETENSORS.match(path) or PT_BIN.match(path):
        return "weights"
    return "tokenizer" if path in TOKENIZER_FILES else ""


def config_of(path: str) -> str:
    """The dataset config a repo file belongs to ("": the default, at the top level or under data/)."""
    top = path.split("/")[0]
    return top if "/" in path and top != "data" else ""


def _place(files: dict[str, Path], config: str) -> dict[str, Path]:
    """A dataset's files under CONFIG/ (those already there keep their path; only they, where the folder has one)."""
    if not config:
        return files
    inside = {rel: src for rel, src in files.items() if rel.split("/")[0] == config}
    if inside:
        return inside
    return {f"{config}/{rel.removeprefix('data/')}": src for rel, src in files.items()}


def _kept(final: Path, kind: str, new: dict[str, Path]) -> tuple[list[FileEntry], list[str], list[str]]:
    """The files of the asset already in the store that this import keeps (of parts or configs it does not bring),
    which parts or configs those are, and the notes on files left out because they are no longer intact."""
    old = read_manifest(final)
    if old is None:
        return [], [], []
    group = part_of if kind == "model" else config_of
    brought = {group(rel) for rel in new}
    wanted = [e for e in old.files if e.path not in new and group(e.path) not in brought
              and (kind == "dataset" or group(e.path))]
    bad = {p.path: p for p in check_files(final, Manifest(**{**old.__dict__, "files": wanted}))}
    keep = [e for e in wanted if final / e.path not in bad]
    dropped = [f"left out of the store's copy: {p}" for p in bad.values()]
    return keep, sorted({group(e.path) for e in keep}), dropped


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _complete_tokenizer(staging: Path, entries: dict[str, FileEntry]) -> tuple[dict, list[str]]:
    """Write the tokenizer_config.json that names what the tokenizer's files leave out (tokenizer_files.py);
    (what the manifest records of the tokenizer, the notes for the user)."""
    info = read_tokenizer(staging, tuple(entries))
    completion = completed_config(info)
    notes = []
    if completion is not None:
        path = staging / TOKENIZER_CONFIG
        path.unlink(missing_ok=True)  # a hard link to the store's older copy, or the user's copy: never written through
        path.write_text(json.dumps(completion.content, indent=2) + "\n")
        entries[TOKENIZER_CONFIG] = _entry(path, TOKENIZER_CONFIG)
        notes.append(completion.describe(info))
        info = read_tokenizer(staging, tuple(entries))
    record = {"kind": info.kind, "special_tokens": info.effective(), "class": info.tokenizer_class or "",
              "written": notes}
    return record, notes


def _entry(path: Path, rel: str) -> FileEntry:
    h = hashlib.sha256(path.read_bytes())
    st = path.stat()
    return FileEntry(path=rel, size=st.st_size, sha256=h.hexdigest(), mtime_ns=st.st_mtime_ns)


def import_asset(source: Path, store: Path, kind: str, repo_id: str, revision: str = "main",
                 config: str | None = None) -> Imported:
    """Copy the files of `source` into the store as `kind` `repo_id`@`revision` (a dataset's under `config`/ when
    given), with a manifest, keeping the parts or configs of the asset already there that the import does not bring.

    Bad input (a missing or empty source, files that make no model or dataset, a bad repo id, a tokenizer file that
    is not JSON) is a ConfigError or AssetError before anything is written. An asset already in the store is
    replaced only when complete."""
    check_repo(repo_id, f"--{kind}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+/-]*", revision) or ".." in revision:
        raise ConfigError(f"{revision!r} is not a revision such as main, v1.0 or a commit", key="--revision")
    if config is not None and (kind != "dataset" or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", config)):
        raise ConfigError(f"{config!r} is not a dataset config such as wikitext-2-raw-v1", key="--dataset")
    source = source.expanduser()
    files = _place(source_files(source), config or "") if source.exists() else {}
    _check_source(source, kind, files)
    if kind == "model" and "tokenizer" in contents(kind, sorted(files))[0]:  # a file that is not JSON: said now
        read_tokenizer(source if source.is_dir() else source.parent, tuple(p for p in files if "/" not in p))
    final = asset_path(store, kind, repo_id, revision)
    staging = staging_path(final)
    with locked(final):
        shutil.rmtree(staging, ignore_errors=True)
        try:
            keep, kept, dropped = _kept(final, kind, files)
            entries: dict[str, FileEntry] = {}
            for old in keep:
                _link(final / old.path, staging / old.path)
                entries[old.path] = FileEntry(old.path, old.size, old.sha256, (staging / old.path).stat().st_mtime_ns)
            for rel, src in sorted(files.items()):
                entry = _copy(src, staging / rel)
                entry.path = rel
                entries[rel] = entry
            parts, configs = contents(kind, sorted(entries))
            tokenizer, notes = _complete_tokenizer(staging, entries) if "tokenizer" in parts else ({}, [])
            commit = revision if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision) else ""
            manifest = Manifest(repo_id=repo_id, kind=kind, revision=revision, commit=commit,
                                endpoint=f"imported from {source.resolve()}",
                                staged_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                parts=parts, configs=configs, files=[entries[p] for p in sorted(entries)],
                                tokenizer=tokenizer)
            write_manifest(staging, manifest)
            publish(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return Imported(manifest, final, len(files), tuple(kept), tuple(notes + dropped))
