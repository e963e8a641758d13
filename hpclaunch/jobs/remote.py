"""Jobs submitted over SSH (docs/remote.md): their run directory is on the login node. `status`, `jobs` and
`report` read its small files (the job's record files, timeline, progress, metrics) from a local copy refreshed
over the job's SSH connection as one tar stream, without the logs, checkpoints and the recipe copy (the logs are
streamed by `hpclaunch logs`, hpclaunch/logs/remote.py); the readers then work as for a local run directory.
`resume` reads that copy with the names of the logs and checkpoints added (`resume_view`) and appends its lines to
the run directory there (`append`)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.remote import SshHost, ssh_host
from hpclaunch.errors import CommandError
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles

#: what the local copy leaves out: large, and read elsewhere (logs streamed) or never from here
NOT_COPIED = ("logs", "checkpoints", "recipe")


def copy_dir(record: registry.JobRecord) -> Path:
    """Where the local copy of a remote job's run directory is kept."""
    return hpclaunch_home() / "remote" / Path(record.run_dir).name


def host(record: registry.JobRecord) -> SshHost:
    assert record.remote is not None
    return ssh_host(record.remote)


def local_copy(record: registry.JobRecord) -> Path | None:
    """For a job submitted over SSH, a fresh local copy of the small files of its run directory on the login node
    (the older copy when it cannot be read now, None without one); None for any other job."""
    if not record.remote:
        return None
    local = copy_dir(record)
    fresh = local.with_name(local.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        host(record).get_dir(Path(record.run_dir), fresh, exclude=NOT_COPIED)
    except CommandError:
        shutil.rmtree(fresh, ignore_errors=True)
        return local if local.is_dir() else None
    shutil.rmtree(local, ignore_errors=True)
    fresh.rename(local)
    RunFiles(local).logs.mkdir(exist_ok=True)
    return local


def local_view(record: registry.JobRecord) -> registry.JobRecord:
    """The record with its run_dir the local copy (`local_copy`) for a job submitted over SSH: for the readers of
    a run directory (report); any other record as it is."""
    local = local_copy(record) if record.remote else None
    if record.remote and local is None:
        raise CommandError(f"cannot read the run directory of job {record.job_id} on {host(record).target.label}: "
                           f"{record.run_dir}", hint=f"`hpclaunch status {record.job_id}` says whether the login "
                                                     "node answers; was the run directory removed there?")
    return record if local is None else dataclasses.replace(record, run_dir=str(local))


def resume_view(record: registry.JobRecord) -> Path:
    """What `hpclaunch resume` reads of a job's run directory on the login node, here: the copy of its small files
    (`local_view`), with the names of its logs and checkpoints as empty stand-ins (the restarts its logs number, the
    newest checkpoint), neither of which crosses the connection."""
    local = Path(local_view(record).run_dir)
    out = host(record).run(["sh", "-c", 'cd "$1" && find logs checkpoints -mindepth 1 -maxdepth 2 -printf "%y %p\\n"',
                            "sh", record.run_dir], check=False).stdout
    for line in out.splitlines():
        kind, _, rel = line.partition(" ")
        if not rel or ".." in Path(rel).parts or rel.startswith("/"):
            continue
        path = local / rel
        if kind == "d":
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    return local


def append(record: registry.JobRecord, path: Path, text: str) -> None:
    """Append `text` to the file `path` of the job's run directory on the login node (one write: O_APPEND)."""
    host(record).run(["sh", "-c", 'cat >> "$1"', "sh", str(path)], input=text)
