"""`hpclaunch clean`: which run directories may go, and removing them with their job records.

A run directory is a folder of a run root (``$HPCLAUNCH_HOME/runs`` and the folder of every recorded job's run
directory, and every profile's run_root) that you own and that holds a resolved.yaml or a sweep script. One that no
job record names and that never ran (no logs) is a dry run's (or a submit's killed before it recorded its job). An
orphan is the `.NAME.partial` folder a submit killed while writing its run directory leaves (the run directory is
written there, then renamed): it holds no job, and goes with the dry runs' folders. One that records name goes only
when the scheduler says every job in it has ended (a retry's too); a job still queued, running, being submitted or
in a state the scheduler cannot tell is kept.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.core.paths import expand, hpclaunch_home, scratch_root
from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles, SweepFiles

_AGE = re.compile(r"^([0-9]+)([smhdw]?)$")
_UNIT = {"": 86400, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: A folder without a record younger than this may be a submission that is writing its record right now.
SETTLING_S = 60.0


def parse_age(text: str) -> float:
    """Seconds of an age such as 30d, 12h, 90m, 2w or 45s (a bare number: days)."""
    match = _AGE.match(text.strip().lower())
    if not match:
        raise ConfigError(f"{text!r} is not an age", key="--older-than",
                          hint="a number and a unit: 30d (days), 12h, 90m, 2w, 45s")
    return int(match.group(1)) * _UNIT[match.group(2)]


@dataclass(frozen=True)
class RunDir:
    path: Path
    job_ids: tuple[str, ...]  # empty: a dry run
    age_s: float  # since the folder or one of its direct entries last changed
    keep: str | None = None  # why it stays (a job's state); None: it may go
    orphan: bool = False  # a `.NAME.partial` folder: a submit (or dry run) stopped while it wrote the run directory

    @property
    def dry_run(self) -> bool:
        return not self.job_ids and not self.orphan

    @property
    def what(self) -> str:
        if self.orphan:
            return "orphan: a submit stopped while writing it, no job record"
        return "dry run, or a submit stopped before it recorded a job" if self.dry_run else (
            "job " + ", ".join(self.job_ids))


def _age(path: Path, now: float) -> float:
    newest = path.stat().st_mtime
    for entry in path.iterdir():
        try:
            newest = max(newest, entry.stat().st_mtime)
        except OSError:
            continue
    return max(0.0, now - newest)


def _is_run_dir(path: Path) -> bool:
    """A run or sweep folder of this user's (a shared run_root holds other users' too)."""
    try:
        mine = path.is_dir() and path.stat().st_uid == os.getuid()
    except OSError:
        return False
    return mine and (RunFiles(path).resolved.is_file() or SweepFiles(path).script.is_file())


def _is_orphan(path: Path) -> bool:
    """A run or sweep directory that was never finished: the `.NAME.partial` folder rundir.write_run_dir renames
    to NAME when it is complete, left by a process killed before that (nothing names it, nothing reads it)."""
    try:
        return (path.name.startswith(".") and path.name.endswith(".partial") and path.is_dir()
                and path.stat().st_uid == os.getuid())
    except OSError:
        return False


def _ran(path: Path) -> bool:
    """Whether a job ran in `path` (it wrote logs): then a folder without a record is not a dry run's."""
    try:
        return any(RunFiles(path).logs.iterdir())
    except OSError:
        return False


def _profile_run_roots() -> set[Path]:
    from hpclaunch.config.loader import profile_files, read_yaml

    roots = set()
    for name, file in profile_files().items():
        try:
            data = read_yaml(file)
            root = data.get("run_root")
            if isinstance(root, str) and root and not data.get("remote"):  # a remote's run root is on its login node
                roots.add(expand(root, f"profile {name} run_root"))
        except HpclaunchError:
            continue  # a broken profile: `hpclaunch profiles check` says why
    return roots


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def find(*, dry_runs_only: bool, older_than_s: float | None, now: float | None = None) -> list[RunDir]:
    """The run directories old enough to consider, oldest first, each with why it stays (`keep`) if it does."""
    from hpclaunch.jobs.state import retries, statuses

    now = time.time() if now is None else now
    records = registry.all_records()
    scratch = scratch_root()
    roots = {hpclaunch_home() / "runs", *_profile_run_roots(), *([scratch / "runs"] if scratch else [])}
    roots |= {Path(r.run_dir).parent for r in records if "index" not in (r.sweep or {}) and not r.remote}
    entries = [d for root in roots if root.is_dir() for d in root.iterdir()]
    folders = sorted({d.resolve() for d in entries if _is_run_dir(d) or _is_orphan(d)})
    owners = {f: [r for r in records if _inside(Path(r.run_dir).resolve(), f)] for f in folders}
    found = []
    for folder in folders:
        try:
            age = _age(folder, now)
        except OSError:
            continue  # removed meanwhile
        mine = owners[folder]
        if (dry_runs_only and mine) or (older_than_s is not None and age < older_than_s):
            continue
        if not mine and age < SETTLING_S:
            continue
        found.append(RunDir(folder, tuple(r.job_id for r in mine), age, orphan=_is_orphan(folder)))
    asked = [r for d in found for r in owners[d.path]]
    states = statuses(asked) if asked else {}
    out = []
    for d in found:
        keep = None if owners[d.path] or not _ran(d.path) else "no job record names it, but a job ran in it"
        for r in owners[d.path]:
            chain = retries(r)
            ids = [r.job_id, *([str(chain[-1]["to"])] if chain else [])]  # the ids statuses() asks about
            live = [(i, states[i].state) for i in ids if i in states and not states[i].finished]
            if live or any(i not in states for i in ids):
                job_id, state = live[0] if live else (r.job_id, "UNKNOWN")
                keep = f"job {job_id} is {state}"
                break
        out.append(RunDir(d.path, d.job_ids, d.age_s, keep, d.orphan))
    return sorted(out, key=lambda d: -d.age_s)


def remove(run_dir: RunDir) -> None:
    """Delete a removable run directory, then its jobs' records."""
    assert run_dir.keep is None, run_dir
    shutil.rmtree(run_dir.path)
    for job_id in run_dir.job_ids:
        registry.remove(job_id)
