"""Stage hub assets into the store: skip what is complete, fetch the rest, write the manifest, rename.

One asset at a time, files in parallel inside the download worker (``hpclaunch.assets.fetch``, one
child process per endpoint tried, because huggingface_hub reads ``HF_ENDPOINT`` at import). Endpoints
are tried in order; files already fetched from one are kept when the next one takes over.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpclaunch.assets.requests import AssetRequest
from hpclaunch.assets.store import (
    FileEntry,
    Manifest,
    asset_path,
    check_files,
    locked,
    publish,
    read_manifest,
    refresh_mtimes,
    staging_path,
    write_manifest,
)
from hpclaunch.errors import AssetError, HpclaunchError

DEFAULT_ENDPOINT = "https://huggingface.co"


class Unreachable(AssetError):
    """No endpoint answered at all (no network here, or every mirror down): offline, in effect."""

Event = Callable[[AssetRequest, dict], None]


@dataclass
class StageResult:
    request: AssetRequest
    path: Path
    status: str  # present | staged
    files: int = 0
    bytes: int = 0
    downloaded_bytes: int = 0
    seconds: float = 0.0
    endpoint: str | None = None
    commit: str | None = None
    retries: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "kind": self.request.kind,
            "repo_id": self.request.repo_id,
            "revision": self.request.revision,
            "path": str(self.path),
            "status": self.status,
            "files": self.files,
            "bytes": self.bytes,
            "downloaded_bytes": self.downloaded_bytes,
            "seconds": round(self.seconds, 3),
            "endpoint": self.endpoint,
            "commit": self.commit,
            "retries": self.retries,
            "notes": self.notes,
        }


def endpoints_for(cli_endpoints: Sequence[str], mirror: str | None, fallbacks: Sequence[str]) -> list[str]:
    """--endpoint (in order) if given, else the profile's mirror then its fallback endpoints."""
    chosen = list(cli_endpoints) or [e for e in (mirror, *fallbacks) if e] or [DEFAULT_ENDPOINT]
    return list(dict.fromkeys(e.rstrip("/") for e in chosen))


def covers(manifest: Manifest, request: AssetRequest) -> bool:
    return request.parts <= set(manifest.parts) and request.configs <= set(manifest.configs)


def stage_one(
    request: AssetRequest,
    store: Path,
    endpoints: Sequence[str],
    *,
    workers: int = 8,
    verify: bool = False,
    on_event: Event | None = None,
    timeout: float = 10.0,
    retries: int = 4,
    dead: set[str] | None = None,
) -> StageResult:
    """Stage one asset (or find it complete). `dead` collects endpoints that did not answer, so the
    next assets of the same run skip them."""
    t0 = time.monotonic()
    final = asset_path(store, request.kind, request.repo_id, request.revision)
    old = read_manifest(final)
    if old is not None and covers(old, request) and not check_files(final, old, rehash=verify):
        refresh_mtimes(final, old)
        return _present(request, final, old, t0)
    if old is not None:  # stage the union, so what the store had stays staged
        request = _union(request, old)
    with locked(final):
        staging = staging_path(final)
        if old is not None:
            _seed(final, old, staging)
        errors: list[str] = []
        codes: list[str] = []
        dead = dead if dead is not None else set()
        outcome: dict = {"error": ("unreachable", "every endpoint was unreachable earlier in this run")}
        for endpoint in [e for e in endpoints if e not in dead] or list(endpoints):
            outcome = _fetch(request, staging, endpoint, workers, timeout, retries, on_event)
            if outcome["error"] is None:
                return _staged(request, staging, final, endpoint, outcome, t0)
            code, message = outcome["error"]
            errors.append(f"{endpoint}: {message}")
            codes.append(code)
            if code == "unreachable":
                dead.add(endpoint)
            if on_event is not None:
                on_event(request, {"event": "endpoint_failed", "endpoint": endpoint, "message": message})
    raise _failure(request, errors, codes or [outcome["error"][0]], endpoints)


def _present(request: AssetRequest, final: Path, old: Manifest, t0: float) -> StageResult:
    """Complete in the store already: nothing fetched, what the manifest says reported."""
    return StageResult(
        request,
        final,
        "present",
        len(old.files),
        old.total_bytes,
        0,
        time.monotonic() - t0,
        old.endpoint,
        old.commit,
    )


def _union(request: AssetRequest, old: Manifest) -> AssetRequest:
    """The request with the parts and configs the store already has, so a restage does not drop them."""
    return AssetRequest(
        request.kind,
        request.repo_id,
        request.revision,
        request.parts | set(old.parts),
        request.configs | set(old.configs),
    )


def _staged(
    request: AssetRequest, staging: Path, final: Path, endpoint: str, outcome: dict, t0: float
) -> StageResult:
    """Write the manifest of what the worker fetched and publish the folder: the asset is complete only now."""
    manifest = Manifest(
        request.repo_id,
        request.kind,
        request.revision,
        outcome["commit"],
        endpoint,
        time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        sorted(request.parts),
        sorted(request.configs),
        sorted((FileEntry(**f) for f in outcome["files"]), key=lambda f: f.path),
    )
    _publish(staging, final, manifest)
    return StageResult(
        request,
        final,
        "staged",
        len(manifest.files),
        manifest.total_bytes,
        outcome["downloaded"],
        time.monotonic() - t0,
        endpoint,
        manifest.commit,
        outcome["retries"],
    )


def _failure(
    request: AssetRequest, errors: list[str], codes: list[str], endpoints: Sequence[str]
) -> AssetError:
    """The error for an asset no endpoint gave: `errors` and `codes` (fetch.py's classes, by exception type, never
    by wording) one per endpoint tried."""
    what = f"{request.kind} {request.repo_id!r} (revision {request.revision})"
    detail = "\n  ".join(errors)
    if all(code == "not_found" for code in codes):
        return AssetError(
            f"{what} was not found on {', '.join(endpoints)}",
            hint="check the repo id (hub repo ids look like org/name), or give --endpoint",
        )
    if all(code == "revision" for code in codes):
        return AssetError(f"{what}: revision {request.revision!r} not found on {', '.join(endpoints)}")
    if all(code == "unreachable" for code in codes):
        return Unreachable(
            f"no endpoint reachable for {what}:\n  {detail}",
            hint="check the network, --endpoint, or the profile's assets.mirror / assets.endpoints",
        )
    if codes[-1] == "files":
        return AssetError(
            f"{what} does not hold what was asked for:\n  {detail}",
            hint="check the dataset config name (REPO:CONFIG) or the model repo",
        )
    return AssetError(
        f"could not stage {what}:\n  {detail}",
        hint="run the same command again: files already fetched are kept",
    )


def _fetch(
    request: AssetRequest,
    staging: Path,
    endpoint: str,
    workers: int,
    timeout: float,
    retries: int,
    on_event: Event | None,
) -> dict:
    """One endpoint's try: a download worker with this HF_ENDPOINT, its events summed up; a crash is an error."""
    job = {
        "repo_id": request.repo_id,
        "kind": request.kind,
        "revision": request.revision,
        "parts": sorted(request.parts),
        "configs": sorted(request.configs),
        "staging": str(staging),
        "workers": workers,
        "timeout": timeout,
        "retries": retries,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpclaunch.assets.fetch", json.dumps(job)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_worker_env(endpoint, timeout),
        text=True,
    )
    out = _read_events(proc, request, on_event)
    stderr = proc.stderr.read() if proc.stderr else ""
    rc = proc.wait()
    if proc.stdin is not None:
        proc.stdin.close()
    if rc != 0 and out["error"] is None:
        tail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {rc}"
        out["error"] = ("crash", f"the download worker failed: {tail}")
    return out


def _worker_env(endpoint: str, timeout: float) -> dict[str, str]:
    """huggingface_hub reads its settings from the environment at import: this endpoint, online, quiet."""
    env = dict(
        os.environ,
        HF_ENDPOINT=endpoint,
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_ETAG_TIMEOUT=str(int(max(1, timeout))),
        HF_HUB_DOWNLOAD_TIMEOUT=str(int(max(1, timeout))),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    env.pop("HF_HUB_OFFLINE", None)
    return env


def _read_events(proc: subprocess.Popen[str], request: AssetRequest, on_event: Event | None) -> dict:
    """Sum up the worker's events as they come (commit, files, bytes, retries, error), passing each on."""
    out: dict = {"error": None, "commit": None, "files": [], "downloaded": 0, "retries": 0}
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        kind = ev.get("event")
        if kind == "plan":
            out["commit"] = ev["commit"]
        elif kind == "file":
            out["files"].append({k: ev[k] for k in ("path", "size", "sha256", "mtime_ns")})
        elif kind == "progress":
            out["downloaded"] += ev["bytes"]
        elif kind == "retry":
            out["retries"] += 1
        elif kind == "error":
            out["error"] = (ev["code"], ev["message"])
        if on_event is not None:
            on_event(request, ev)
    return out


def _seed(final: Path, manifest: Manifest, staging: Path) -> None:
    """Hard-link the intact files of an existing asset into the staging folder, so a restage (to add
    a part or a config, or to repair a corrupt file) fetches only what is new or bad."""
    bad = {p.path for p in check_files(final, manifest)}
    records = []
    for entry in manifest.files:
        src, dst = final / entry.path, staging / entry.path
        if src in bad or dst.exists() or not src.is_file():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        records.append(
            json.dumps(
                {
                    "path": entry.path,
                    "size": entry.size,
                    "sha256": entry.sha256,
                    "mtime_ns": dst.stat().st_mtime_ns,
                }
            )
        )
    if records:
        with open(staging / ".hpclaunch-files.jsonl", "a") as fh:
            fh.write("\n".join(records) + "\n")


def _publish(staging: Path, final: Path, manifest: Manifest) -> None:
    """Drop the worker's bookkeeping, write the manifest, and rename the folder into place."""
    shutil.rmtree(staging / ".cache", ignore_errors=True)
    (staging / ".hpclaunch-files.jsonl").unlink(missing_ok=True)
    keep = {f.path for f in manifest.files}
    for p in sorted(staging.rglob("*"), reverse=True):  # leftovers of an earlier, different attempt
        rel = p.relative_to(staging).as_posix()
        if p.is_file() and rel not in keep:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    write_manifest(staging, manifest)
    publish(staging, final)


def stage_many(
    requests: Sequence[AssetRequest],
    store: Path,
    endpoints: Sequence[str],
    *,
    workers: int = 8,
    verify: bool = False,
    timeout: float = 10.0,
    on_event: Event | None = None,
) -> tuple[list[StageResult], list[str]]:
    """Stage each request in turn: (results, one error message per asset that failed). Once every
    endpoint has refused, the rest are not tried one by one."""
    results: list[StageResult] = []
    errors: list[str] = []
    dead: set[str] = set()
    for i, req in enumerate(requests):
        if dead >= set(endpoints):
            errors.append(f"not attempted (no endpoint reachable): {', '.join(q.label for q in requests[i:])}")
            break
        try:
            results.append(stage_one(req, store, endpoints, workers=workers, verify=verify, on_event=on_event,
                                     timeout=timeout, dead=dead))
        except HpclaunchError as exc:
            errors.append(str(exc))
    return results, errors
