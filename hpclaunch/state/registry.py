"""Job records under ``$HPCLAUNCH_HOME/registry``: one JSON file per job, written atomically
(temporary file + rename), so concurrent submits never lose or corrupt a record.

A submission is recorded before the scheduler is asked (`begin`): a *pending* record
(``pending-<name>.json``, locked by the submitting process) that names the run directory, then the job's
own record once the scheduler gave its id (`Pending.complete`). A submit killed in between leaves the
pending record unlocked; `recover` finds the job it queued (or removes the record and the run directory
when it queued none), so `hpclaunch jobs` always shows every job that was queued.

A record that cannot be read (truncated JSON, an unknown scheduler, unknown keys) is a `RegistryError`
naming its file for that job, and is skipped with a warning in listings.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import IO, Any

from hpclaunch.core.backends import SCHEDULERS
from hpclaunch.core.paths import hpclaunch_home, writable_dir
from hpclaunch.errors import ConfigError, HpclaunchError, NotFoundError

PENDING_PREFIX = "pending-"
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
_LOCAL_ID = re.compile(r"^local-([0-9]{1,18})$")


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
    pending: bool = False  # recorded before the scheduler answered (see `begin`)
    # a continuation (`hpclaunch resume`): {"job": the job it continues, "checkpoint": the checkpoint folder it
    # resumes from (null: from scratch), "step", "restart": its first restart number, "from_scratch"}
    resumes: dict[str, Any] | None = None
    spare_nodes: int = 0  # nodes asked beyond the layout's (submit --spare-nodes): the goodput ledger counts them
    # submitted over SSH (docs/remote.md): the login node {"host", "user", "port", "identity", "known_hosts"}; the run
    # directory is there, and the scheduler's commands run there
    remote: dict[str, Any] | None = None


_KEYS = {f.name for f in fields(JobRecord)}
_OPTIONAL = {"preset", "pending", "sweep", "resumes", "spare_nodes", "remote"}


class RegistryError(HpclaunchError):
    """A job record that cannot be read. Names the file and what to do."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: unreadable job record: {why}",
                         hint=f"move it away or delete it (rm {path}); it does not affect other jobs")
        self.path = path


def registry_dir() -> Path:
    return hpclaunch_home() / "registry"


def _atomic_write(path: Path, text: str) -> None:
    writable_dir(path.parent, "job registry")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_job_id(job_id: str) -> str:
    if not _JOB_ID.match(job_id):
        shown = job_id if len(job_id) <= 60 else job_id[:60] + "..."
        raise ConfigError(f"{shown!r} is not a job id (letters, digits and _ . + -, at most 128 characters)",
                          hint="`hpclaunch jobs` lists the jobs submitted with hpclaunch from this account")
    return job_id


def _record_path(job_id: str) -> Path:
    return registry_dir() / f"{check_job_id(job_id)}.json"


def _dump(record: JobRecord) -> str:
    data = asdict(record)
    for key in ("resumes", "remote"):  # only continuations (jobs over SSH) carry it: a record reads the same to
        if data[key] is None:  # older versions
            del data[key]
    return json.dumps(data, indent=2) + "\n"


def add(record: JobRecord) -> None:
    _atomic_write(_record_path(record.job_id), _dump(record))


def remove(job_id: str) -> None:
    """Forget a job (`hpclaunch clean`): its record goes; nothing else is touched."""
    _record_path(job_id).unlink(missing_ok=True)


def parse(path: Path) -> JobRecord:
    """The record in `path`; a RegistryError saying what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RegistryError(path, f"cannot read it: {exc.strerror}") from None
    except ValueError as exc:  # truncated or not JSON, not UTF-8
        raise RegistryError(path, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RegistryError(path, "not a JSON object")
    unknown, missing = sorted(set(data) - _KEYS), sorted(_KEYS - _OPTIONAL - set(data))
    if unknown or missing:
        said = [f"unknown keys {', '.join(unknown)}"] if unknown else []
        said += [f"missing keys {', '.join(missing)}"] if missing else []
        raise RegistryError(path, "; ".join(said))
    for key, value in data.items():
        ok = (isinstance(value, bool) if key == "pending" else
              isinstance(value, int) and not isinstance(value, bool) and value >= 0 if key == "spare_nodes" else
              isinstance(value, dict) or value is None if key in ("sweep", "resumes", "remote") else
              isinstance(value, str) or (key == "preset" and value is None))
        if not ok:
            raise RegistryError(path, f"{key} is {value!r}")
    if data["scheduler"] not in SCHEDULERS:
        raise RegistryError(path, f"unknown scheduler {data['scheduler']!r} (known: {', '.join(SCHEDULERS)})")
    return JobRecord(**data)


def get(job_id: str) -> JobRecord:
    path = _record_path(str(job_id))
    if not path.is_file():
        retry = _retry(str(job_id))
        if retry is not None:
            return retry
        raise NotFoundError("job", str(job_id),
                            hint="`hpclaunch jobs` lists the jobs submitted with hpclaunch from this account")
    return parse(path)


def _retry(job_id: str) -> JobRecord | None:
    """A job the job script resubmitted after a node-level failure (submit --retries) has no record of its
    own: it is found in the retry chain (RUN_DIR/retries.jsonl) of the job it replaced, and shares its run
    directory."""
    from hpclaunch.state.runfiles import RunFiles, read_json_lines

    for record in all_records():
        if any(str(entry.get("to")) == job_id for entry in read_json_lines(RunFiles(Path(record.run_dir)).retries)):
            return replace(record, job_id=job_id)
    return None


def all_records(bad: list[RegistryError] | None = None) -> list[JobRecord]:
    """Every record, oldest first (pending ones included). Unreadable records are skipped; each is
    appended to `bad` when given."""
    folder = registry_dir()
    if not folder.is_dir():
        return []
    records = []
    for path in folder.glob("*.json"):
        try:
            records.append(parse(path))
        except RegistryError as exc:
            if path.exists() and bad is not None:  # else: replaced meanwhile
                bad.append(exc)
    return sorted(records, key=lambda r: (r.submitted_at, r.job_id))


def newest() -> JobRecord:
    """The job submitted last (`hpclaunch logs` without a job); a NotFoundError when none is recorded."""
    records = [r for r in all_records() if not r.pending]
    if not records:
        raise HpclaunchError("no job is recorded yet", hint="`hpclaunch submit RECIPE --profile PROFILE`")
    return records[-1]


def _max_local_id(folder: Path) -> int:
    found = (_LOCAL_ID.match(p.stem) for p in folder.glob("local-*.json"))
    return max((int(m.group(1)) for m in found if m), default=0)


def next_local_id() -> str:
    """A job id for the local scheduler: ``local-<n>``, unique under concurrent submits (flock). A counter
    file that is not a number is repaired from the records."""
    folder = writable_dir(registry_dir(), "job registry")
    with open(folder / "local.counter", "a+", encoding="utf-8", errors="replace") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read().strip()
        current = (int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else _max_local_id(folder)) + 1
        f.seek(0)
        f.truncate()
        f.write(str(current))
        f.flush()
        os.fsync(f.fileno())
    return f"local-{current}"


# --- pending records: the submission recorded before the scheduler is asked -------------------------


class Pending:
    """A pending record held (flock) by the submitting process until `complete` or `abandon`."""

    def __init__(self, path: Path, handle: IO[str], record: JobRecord):
        self.path, self._handle, self.record = path, handle, record

    def complete(self, job_id: str) -> JobRecord:
        record = replace(self.record, job_id=job_id, pending=False)
        add(record)
        self.abandon()
        return record

    def abandon(self) -> None:
        self.path.unlink(missing_ok=True)
        self._handle.close()  # releases the lock


def begin(record: JobRecord) -> Pending:
    """Record `record` (its job_id is ignored) as pending, locked by this process."""
    folder = writable_dir(registry_dir(), "job registry")
    name = f"{PENDING_PREFIX}{Path(record.run_dir).name}"[:120]
    pending = replace(record, job_id=name, pending=True)
    path = folder / f"{name}.json"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    handle = os.fdopen(fd, "w", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)  # locked before it has its name: nobody sees it unlocked
        handle.write(_dump(pending))
        handle.flush()
        os.replace(tmp, path)
    except BaseException:
        handle.close()
        Path(tmp).unlink(missing_ok=True)
        raise
    return Pending(path, handle, pending)


def _abandoned(path: Path) -> IO[str] | None:
    """The pending record's file, locked, when the process that wrote it is gone; None while it runs (or
    when the record was completed meanwhile)."""
    try:
        handle = open(path, encoding="utf-8")
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    try:
        same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except OSError:
        same = False
    if not same:
        handle.close()
        return None
    return handle


def recover(find_job: Callable[[JobRecord], str | None]) -> list[str]:
    """Settle the pending records of submits that were killed: `find_job(record)` gives the id of the job
    queued from its run directory, or None when it queued none (raise HpclaunchError when it cannot
    tell: the record stays). A resume's record (`hpclaunch resume`) names the run directory of the job it
    resumes: found that job's id, or none, nothing was queued, and the run directory stays. Returns one line
    per record settled, for the user."""
    folder = registry_dir()
    said: list[str] = []
    if not folder.is_dir():
        return said
    for path in sorted(folder.glob(f"{PENDING_PREFIX}*.json")):
        handle = _abandoned(path)
        if handle is None:
            continue
        try:
            record = parse(path)
            job_id = find_job(record)
        except HpclaunchError:
            handle.close()
            continue
        resumed = (record.resumes or {}).get("job")
        if job_id and job_id != resumed:
            add(replace(record, job_id=job_id, pending=False))
            said.append(f"job {job_id} from {record.run_dir} was queued by a submit that was interrupted; "
                        "recorded it now")
        elif resumed and not (record.resumes or {}).get("from_scratch"):  # the run directory is the resumed job's
            said.append(f"the resume of job {resumed} was stopped before the scheduler answered, and no job runs "
                        f"from {record.run_dir}: nothing was queued (`hpclaunch resume {resumed}` again)")
        else:
            shutil.rmtree(record.run_dir, ignore_errors=True)
            said.append(f"the submission of {record.run_dir} never completed (hpclaunch was stopped before the "
                        "scheduler answered) and no job runs from it: removed its record and run directory")
        path.unlink(missing_ok=True)
        handle.close()
    return said
