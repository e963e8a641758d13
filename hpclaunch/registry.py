"""Job records under ``$HPCLAUNCH_HOME/registry``: one JSON file per job, written atomically
(temporary file + rename), so concurrent submits never lose or corrupt a record."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hpclaunch.errors import NotFoundError
from hpclaunch.paths import hpclaunch_home


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    scheduler: str
    profile: str
    recipe: str
    preset: str | None
    launcher: str
    layout: str
    name: str
    run_dir: str
    submitted_at: str
    # a sweep (submit --sweep, docs/sweeps.md): on the sweep's record {"id", "keys", "elements", "max_parallel"};
    # on each element's record (job id ARRAY_TASK) {"id": the sweep's id, "index", "values"}
    sweep: dict[str, Any] | None = None


def registry_dir() -> Path:
    return hpclaunch_home() / "registry"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _record_path(job_id: str) -> Path:
    safe = job_id.replace("/", "_")
    return registry_dir() / f"{safe}.json"


def add(record: JobRecord) -> None:
    _atomic_write(_record_path(record.job_id), json.dumps(asdict(record), indent=2) + "\n")


def get(job_id: str) -> JobRecord:
    path = _record_path(str(job_id))
    if not path.is_file():
        retry = _retry(str(job_id))
        if retry is not None:
            return retry
        raise NotFoundError("job", str(job_id),
                            hint="`hpclaunch jobs` lists the jobs submitted with hpclaunch from this account")
    return JobRecord(**json.loads(path.read_text(encoding="utf-8")))


def _retry(job_id: str) -> JobRecord | None:
    """A job the job script resubmitted after a node-level failure (submit --retries) has no record of its
    own: it is found in the retry chain (RUN_DIR/retries.jsonl) of the job it replaced, and shares its run
    directory."""
    from hpclaunch.runfiles import RunFiles

    for record in all_records():
        try:
            chain = RunFiles(Path(record.run_dir)).retries.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in chain.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and str(entry.get("to")) == job_id:
                return replace(record, job_id=job_id)
    return None


def all_records() -> list[JobRecord]:
    """Every record, oldest first."""
    folder = registry_dir()
    if not folder.is_dir():
        return []
    records = []
    for path in folder.glob("*.json"):
        try:
            records.append(JobRecord(**json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError):
            continue  # a file being replaced or a foreign file: skip it
    return sorted(records, key=lambda r: (r.submitted_at, r.job_id))


def next_local_id() -> str:
    """A job id for the local scheduler: ``local-<n>``, unique under concurrent submits (flock)."""
    folder = registry_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "local.counter", "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        current = int(f.read().strip() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(current))
        f.flush()
        os.fsync(f.fileno())
    return f"local-{current}"
