"""The download worker: one child process per (asset, endpoint), run as ``python -m hpclaunch.assets.fetch``.

huggingface_hub reads ``HF_ENDPOINT`` when it is imported, so each endpoint gets its own process with
the variable set before the import (the parent never imports huggingface_hub). The parent passes the
job as JSON in argv[1] and reads JSON lines on stdout:

    {"event": "plan", "commit": SHA, "files": [{"path", "size", "sha256"}...], "skipped": N}
    {"event": "progress", "bytes": B}                  bytes received since the last report
    {"event": "file", "path", "size", "sha256", "mtime_ns", "cached"}
    {"event": "retry", "path", "attempt", "error"}
    {"event": "error", "code": "not_found|revision|unreachable|server|files|integrity", "message"}
    {"event": "done"}

Files go into the staging folder (beside the final one) with their repo paths. Finished files are
recorded in ``.hpclaunch-files.jsonl`` there, so a rerun after a kill skips them without rehashing.
The child exits when its stdin closes (the parent died), so a ``kill -9`` leaves no orphan downloading.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch.assets.requests import select_files

RECORD = ".hpclaunch-files.jsonl"
TAIL_HASH_MIN = 8 << 20  # hash files at least this large while they download
_out_lock = threading.Lock()
_received = 0
_recv_lock = threading.Lock()


def emit(event: str, **data: Any) -> None:
    line = json.dumps({"event": event, **data})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _add_bytes(n: int) -> None:
    global _received
    with _recv_lock:
        _received += n


class _Progress:
    """A tqdm stand-in for huggingface_hub's http_get: counts bytes, draws nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.n = kwargs.get("initial", 0) or 0

    tail: Any = None

    def update(self, n: int | float | None = 1) -> None:
        n = int(n or 0)
        if n < 0 and self.tail is not None:
            self.tail.rewound = True  # http_get restarted the file from 0: the early hash is void
        self.n += n
        _add_bytes(n)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def _reporter(stop: threading.Event) -> None:
    global _received
    while not stop.wait(0.2):
        with _recv_lock:
            n, _received = _received, 0
        if n:
            emit("progress", bytes=n)


class _TailHasher:
    """Hashes a large file while huggingface_hub writes it (its temporary ``*.<etag>.*.incomplete``
    file), so the sha256 check costs no second read. Its digest is used only if it matches the server's
    LFS oid and the download never rewound; otherwise the finished file is hashed again."""

    def __init__(self, folder: Path, etag: str):
        self.folder, self.etag = folder, etag
        self.sha = hashlib.sha256()
        self.pos, self.rewound = 0, False
        self.fd: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _read(self) -> bool:
        assert self.fd is not None  # called only once the file is open
        chunk = os.read(self.fd, 8 << 20)
        if chunk:
            self.sha.update(chunk)
            self.pos += len(chunk)
        return bool(chunk)

    def _run(self) -> None:
        while self.fd is None and not self.stop.is_set():
            found = sorted(self.folder.glob(f"*.{self.etag}.*.incomplete")) if self.folder.is_dir() else []
            if len(found) == 1:
                try:
                    self.fd = os.open(found[0], os.O_RDONLY)
                except OSError:
                    pass
            if self.fd is None:
                time.sleep(0.01)
        while self.fd is not None and not self.stop.is_set():
            if not self._read():
                time.sleep(0.005)

    def digest(self, size: int) -> str | None:
        self.stop.set()
        self.thread.join()
        if self.fd is None:
            return None
        try:
            while self.pos < size and self._read():  # the renamed file is the same inode
                pass
        finally:
            os.close(self.fd)
        return self.sha.hexdigest() if self.pos == size and not self.rewound else None


def _watch_parent() -> None:
    try:
        sys.stdin.read()
    finally:
        os._exit(3)


def _hashes(path: Path, want_git: bool) -> tuple[str, str | None]:
    sha, git = hashlib.sha256(), None
    size = path.stat().st_size
    if want_git:
        git = hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            sha.update(chunk)
            if git is not None:
                git.update(chunk)
    return sha.hexdigest(), (git.hexdigest() if git is not None else None)


def _load_records(staging: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    try:
        for line in (staging / RECORD).read_text().splitlines():
            try:
                rec = json.loads(line)
                out[rec["path"]] = rec
            except (ValueError, KeyError):
                continue  # a line cut by a kill
    except OSError:
        pass
    return out


# An endpoint that did not answer, by exception type (and its bases): httpx's (huggingface_hub >= 1.0) and
# requests' (before) connection errors, the standard library's, huggingface_hub's offline errors.
_UNREACHABLE = {"ConnectError", "ConnectTimeout", "ConnectionError", "OfflineModeIsEnabled", "LocalEntryNotFoundError"}


def _classify(exc: BaseException | None) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"RepositoryNotFoundError", "GatedRepoError"}:
        return "not_found"
    if "RevisionNotFoundError" in names:
        return "revision"
    if names & _UNREACHABLE:
        return "unreachable"
    return "server"


def main(job: dict[str, Any]) -> int:
    threading.Thread(target=_watch_parent, daemon=True).start()
    from huggingface_hub import HfApi, hf_hub_download  # HF_ENDPOINT is set: import only now

    repo, kind, staging = job["repo_id"], job["kind"], Path(job["staging"])
    repo_type = "dataset" if kind == "dataset" else "model"
    api = HfApi()
    timeout = float(job.get("timeout", 10))
    listed = _list_repo(api, job, repo_type, timeout)
    if listed is None:
        return 1
    sha, tree = listed
    entries: dict[str, Any] = {e.path: e for e in tree if getattr(e, "size", None) is not None}
    chosen, problems = select_files(kind, sorted(entries), job.get("parts", ()), job.get("configs", ()))
    if problems:
        emit("error", code="files", message="; ".join(problems))
        return 1
    staging.mkdir(parents=True, exist_ok=True)
    todo, done = _split_finished(staging, entries, chosen)
    _announce(sha, entries, chosen, done)
    failed = _download_all(_Downloader(hf_hub_download, job, repo, repo_type, sha, staging, timeout), todo)
    return _finish(failed)


def _list_repo(api: Any, job: dict[str, Any], repo_type: str, timeout: float) -> tuple[str, list[Any]] | None:
    """The revision's commit and file tree, so every file comes from one commit; only server errors are retried."""
    sha, tree, last = None, None, None
    for attempt in range(3):
        try:
            sha = api.repo_info(job["repo_id"], repo_type=repo_type, revision=job["revision"], timeout=timeout).sha
            tree = list(api.list_repo_tree(job["repo_id"], repo_type=repo_type, revision=sha, recursive=True))
            break
        except Exception as exc:  # noqa: BLE001 - classified and reported to the parent
            last = exc
            if _classify(exc) != "server":
                break
            time.sleep(0.3 * (attempt + 1))
    if sha is None or tree is None:
        emit("error", code=_classify(last), message=f"{type(last).__name__}: {str(last).splitlines()[0]}")
        return None
    return sha, tree


def _split_finished(staging: Path, entries: dict[str, Any], chosen: list[str]) -> tuple[list[tuple], list[dict]]:
    """(files to fetch, records of files an earlier run finished): a rerun after a kill fetches only the rest."""
    records = _load_records(staging)
    todo, done = [], []
    for path in chosen:
        e = entries[path]
        expect = e.lfs.sha256 if getattr(e, "lfs", None) else None
        rec = records.get(path)
        if rec and _finished(staging / path, rec, e, expect):
            done.append(rec)
        else:
            todo.append((path, e.size, expect, e.blob_id))
    return todo, done


def _finished(f: Path, rec: dict, entry: Any, expect: str | None) -> bool:
    """Size, mtime and recorded hash as the server says: finished, without reading the file again (small ones aside)."""
    if not f.is_file():
        return False
    st = f.stat()
    if not (st.st_size == rec["size"] == entry.size and st.st_mtime_ns == rec["mtime_ns"]):
        return False
    if rec.get("commit_oid") == entry.blob_id or (expect is not None and rec["sha256"] == expect):
        return True
    # seeded from the store without a blob id: a small file, rehashed
    return expect is None and _hashes(f, want_git=True) == (rec["sha256"], entry.blob_id)


def _file_fields(rec: dict) -> dict:
    """A file event's fields, the same for a file found finished and one just fetched."""
    return {k: rec[k] for k in ("path", "size", "sha256", "mtime_ns")}


def _announce(sha: str, entries: dict[str, Any], chosen: list[str], done: list[dict]) -> None:
    """The plan, then each file an earlier run finished: the parent knows the totals before any bytes arrive."""
    emit(
        "plan",
        commit=sha,
        files=[{"path": p, "size": entries[p].size} for p in chosen],
        skipped=len(done),
        skipped_bytes=sum(r["size"] for r in done),
    )
    for rec in done:
        emit("file", cached=True, **_file_fields(rec))


@dataclass
class _Downloader:
    """What every file's download shares: the repo at one commit, the staging folder and the record's lock."""

    hf_hub_download: Callable[..., str]
    job: dict[str, Any]
    repo: str
    repo_type: str
    sha: str
    staging: Path
    timeout: float
    record_lock: threading.Lock = field(default_factory=threading.Lock)

    def one(self, path: str, size: int, lfs_sha: str | None, blob_id: str) -> dict:
        """Fetch and check one file, retrying what a retry may mend; the last error is raised with the path."""
        retries = int(self.job.get("retries", 4))
        for attempt in range(1, retries + 2):
            try:
                return self._fetch_checked(path, size, lfs_sha, blob_id)
            except Exception as exc:  # noqa: BLE001 - retried, then reported
                (self.staging / path).unlink(missing_ok=True)
                msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                code = _classify(exc)
                if attempt > retries or code in ("not_found", "revision"):
                    raise RuntimeError(f"{path}: {msg}") from exc
                emit("retry", path=path, attempt=attempt, error=msg)
                time.sleep(min(0.2 * 2**attempt, 2.0))
        raise AssertionError("unreachable")

    def _fetch_checked(self, path: str, size: int, lfs_sha: str | None, blob_id: str) -> dict:
        """Download, check size and hash against the server's, then record the file so that a rerun skips it."""
        local, early = self._download(path, size, lfs_sha)
        got = local.stat().st_size
        if got != size:
            raise OSError(f"size {got} differs from the server's {size}")
        t_hash = time.monotonic()
        if early is not None and early == lfs_sha:
            sha256, git, how = early, None, "stream"
        else:
            sha256, git = _hashes(local, want_git=lfs_sha is None)
            how = "reread"
        t_hash = time.monotonic() - t_hash
        _check_hash(sha256, git, lfs_sha, blob_id)
        rec = {
            "path": path,
            "size": got,
            "sha256": sha256,
            "mtime_ns": local.stat().st_mtime_ns,
            "commit_oid": blob_id,
        }
        with self.record_lock, open(self.staging / RECORD, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        emit("file", cached=False, hashed=how, hash_s=round(t_hash, 3), **_file_fields(rec))
        return rec

    def _download(self, path: str, size: int, lfs_sha: str | None) -> tuple[Path, str | None]:
        """(the file, its sha256 if hashed as it arrived): a large LFS file's check then costs no second read."""
        tail = None
        bar: type = _Progress
        if lfs_sha is not None and size >= TAIL_HASH_MIN:
            dl = self.staging / ".cache" / "huggingface" / "download" / Path(path).parent
            tail = _TailHasher(dl, lfs_sha)
            bar = type("_Bar", (_Progress,), {"tail": tail})
        try:
            local = Path(
                self.hf_hub_download(
                    self.repo,
                    path,
                    repo_type=self.repo_type,
                    revision=self.sha,
                    local_dir=self.staging,
                    etag_timeout=self.timeout,
                    tqdm_class=bar,
                )
            )
        finally:
            early = tail.digest(size) if tail is not None else None
        return local, early


def _check_hash(sha256: str, git: str | None, lfs_sha: str | None, blob_id: str) -> None:
    """Refuse a file whose hash is not the server's: the LFS oid (sha256) of an LFS file, else its git blob id."""
    if lfs_sha is not None and sha256 != lfs_sha:
        raise OSError(f"sha256 {sha256[:12]}... differs from the server's LFS oid {lfs_sha[:12]}...")
    if lfs_sha is None and git != blob_id:
        raise OSError(f"git blob id {str(git)[:12]}... differs from the server's {blob_id[:12]}...")


def _download_all(downloader: _Downloader, todo: list[tuple]) -> list[str]:
    """Fetch the files in parallel, bytes reported as they arrive; the error of each file that failed."""
    stop = threading.Event()
    rep = threading.Thread(target=_reporter, args=(stop,), daemon=True)
    rep.start()
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, int(downloader.job.get("workers", 8)))) as pool:
        futures = [pool.submit(downloader.one, *t) for t in todo]
        for fut in as_completed(futures):
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001
                failed.append(str(exc))
    stop.set()
    rep.join()
    with _recv_lock:
        if _received:
            emit("progress", bytes=_received)
    return failed


def _finish(failed: list[str]) -> int:
    """The last event and the exit code: done, or one error for all failed files (integrity if a check failed)."""
    if failed:
        emit(
            "error",
            code="integrity" if any("differs" in f for f in failed) else "download",
            message="; ".join(sorted(failed)[:5])
            + (f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""),
        )
        return 1
    emit("done")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
    sys.exit(main(json.loads(sys.argv[1])))
