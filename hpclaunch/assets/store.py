"""Layout of the offline asset store (shared by staging, verification, preflight and the job runtime).

    STORE/models/<org>--<name>/<revision>/...files...     + hpclaunch-manifest.json
    STORE/datasets/<org>--<name>/<revision>/...files...   + hpclaunch-manifest.json

A folder appears under its final name only when complete (staged beside it, then renamed).
Files keep their paths in the repo: a dataset config's parquet files stay under ``<config>/``
(or ``data/`` for a dataset without configs), so a job loads them with
``load_dataset("parquet", data_files=dataset_files(folder, config, split))``.

The manifest (a lockfile) records the repo, the requested revision and the resolved commit, every
file with size and sha256, the endpoint it came from and when. ``mtime_ns`` is local bookkeeping:
a file whose size and mtime match the manifest is trusted without rehashing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from hpclaunch.errors import AssetError

MANIFEST = "hpclaunch-manifest.json"
KINDS = ("model", "dataset")
STAGING_PREFIX = ".staging-"
_CHUNK = 8 << 20


def store_root(store: str) -> Path:
    """The store path of a profile (``~`` and ``$VARS`` expanded here, on the machine that reads it)."""
    from hpclaunch.core.paths import expand

    return expand(store, "assets.store")


def repo_folder(repo_id: str) -> str:
    return repo_id.replace("/", "--")


def asset_path(store: Path | str, kind: str, repo_id: str, revision: str = "main") -> Path:
    if kind not in KINDS:
        raise ValueError(f"asset kind must be one of {KINDS}, got {kind!r}")
    return Path(store) / f"{kind}s" / repo_folder(repo_id) / revision.replace("/", "--")


def staging_path(final: Path) -> Path:
    """Where an asset is assembled before it is renamed to `final` (same folder: same file system)."""
    return final.parent / f"{STAGING_PREFIX}{final.name}"


def publish(staged: Path, final: Path) -> None:
    """Make the complete folder `staged` visible as `final` by rename, replacing an older `final`,
    so that a reader sees either the old asset or the new one, never half of one."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if not final.exists():
        os.rename(staged, final)
        return
    old = final.parent / f".old-{final.name}-{os.getpid()}"
    os.rename(final, old)
    os.rename(staged, final)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def locked(final: Path) -> Iterator[None]:
    """Hold the store's lock of the asset folder `final` (one writer at a time: staging, importing)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".lock-{final.name}", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AssetError(
                f"{final} is being staged by another process",
                hint="wait for it to finish, or stop it and run stage-assets again",
            ) from None
        yield


def dataset_files(folder: Path | str, config: str | None, split: str) -> list[str]:
    """The parquet files of one split of a staged dataset, e.g. for ``load_dataset("parquet", ...)``."""
    folder = Path(folder)
    base = folder / config if config and (folder / config).is_dir() else folder
    files = sorted(
        p
        for p in base.rglob("*.parquet")
        if p.name.startswith(f"{split}-") or p.name.startswith(f"{split}.") or p.parent.name == split
    )
    return [str(p) for p in files]


def split_files(paths: Iterable[str], config: str | None, split: str) -> list[str]:
    """The parquet files (repo paths) of one split of a dataset, as a job reads them: those under CONFIG/ where the
    dataset has that folder, else all; a file is the split's when its name starts with the split's name or its
    folder is named so."""
    parquet = sorted(p for p in paths if p.endswith(".parquet"))
    inside = [p for p in parquet if config and p.startswith(f"{config}/")]
    return [p for p in inside or parquet
            if PurePosixPath(p).name.startswith(split) or PurePosixPath(p).parent.name == split]


@dataclass
class FileEntry:
    path: str
    size: int
    sha256: str
    mtime_ns: int = 0


@dataclass
class Manifest:
    repo_id: str
    kind: str
    revision: str
    commit: str
    endpoint: str
    staged_at: str
    parts: list[str] = field(default_factory=list)  # model: config, weights, tokenizer
    configs: list[str] = field(default_factory=list)  # dataset configs staged ("" = the default)
    files: list[FileEntry] = field(default_factory=list)
    format: int = 1
    # an imported tokenizer: its kind, the special tokens it loads with, what the import wrote (tokenizer_files.py)
    tokenizer: dict = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        files = [FileEntry(**f) for f in data.get("files", [])]
        keys = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "files"}
        return cls(files=files, **keys)


def read_manifest(folder: Path) -> Manifest | None:
    """The manifest of an asset folder, or None if it has none (or it is unreadable)."""
    try:
        return Manifest.from_dict(json.loads((folder / MANIFEST).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_manifest(folder: Path, manifest: Manifest) -> None:
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(manifest.to_json())
    os.replace(tmp, folder / MANIFEST)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Problem:
    path: Path
    what: str  # "missing", "wrong size (expected N, found M)", "sha256 mismatch"

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def check_files(
    folder: Path, manifest: Manifest, *, rehash: bool = False, hash_modified: bool = True
) -> list[Problem]:
    """Missing, wrong-size or corrupt files.

    A file whose size and mtime match the manifest is trusted unless `rehash`. One whose mtime changed
    is rehashed (`hash_modified`, what staging does), or, where even that is too slow (the check before
    a submit), reported as modified so the user runs ``hpclaunch assets verify`` once."""
    problems = []
    for entry in manifest.files:
        p = folder / entry.path
        try:
            st = p.stat()
        except OSError:
            problems.append(Problem(p, "missing"))
            continue
        if st.st_size != entry.size:
            problems.append(Problem(p, f"wrong size (expected {entry.size} bytes, found {st.st_size})"))
        elif rehash or st.st_mtime_ns != entry.mtime_ns:
            if not rehash and not hash_modified:
                problems.append(Problem(p, "modified since it was staged or verified (its mtime changed)"))
            elif sha256_file(p) != entry.sha256:
                problems.append(Problem(p, f"corrupt (sha256 is not the manifest's {entry.sha256[:12]})"))
    return problems


def refresh_mtimes(folder: Path, manifest: Manifest) -> bool:
    """After a clean rehash: record the files' current mtimes (local bookkeeping, e.g. after the store
    was copied without keeping mtimes), so later quick checks trust them again. True if it changed."""
    changed = False
    for entry in manifest.files:
        mtime = (folder / entry.path).stat().st_mtime_ns
        if mtime != entry.mtime_ns:
            entry.mtime_ns, changed = mtime, True
    if changed:
        write_manifest(folder, manifest)
    return changed


def iter_assets(store: Path) -> Iterator[tuple[Path, Manifest | None]]:
    """Every asset folder of a store with its manifest (None: a folder without a readable manifest)."""
    for kind in KINDS:
        base = store / f"{kind}s"
        if not base.is_dir():
            continue
        for repo in sorted(base.iterdir()):
            if not repo.is_dir():
                continue
            for rev in sorted(repo.iterdir()):
                if rev.is_dir() and not rev.name.startswith("."):
                    yield rev, read_manifest(rev)
