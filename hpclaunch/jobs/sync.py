"""`hpclaunch sync JOB...`: upload the offline W&B runs of jobs, from a node with network (a login node).

A job whose `tracking.wandb` is on writes W&B's offline runs into RUN_DIR/wandb/ (one folder per start of the job,
all with the job's W&B run id: hpclaunch/runtime/train/tracking.py). This finds them for job ids, sweep ids (every
element) or run directories, leaves out what was uploaded before (W&B's own `run-<id>.wandb.synced` marker) and the
folder of a job that is still running (its file is still being written), hands the rest to W&B's own uploader
(`python -m wandb sync`, oldest first, so the starts of one run upload in order) and then checks W&B's markers:
`wandb sync` exits 0 also when it uploaded nothing (no API key, no network).

A job submitted over SSH (docs/remote.md) is synced from here, where the network and the W&B login are: its
offline runs come with the copy of its run directory's small files (jobs/remote.py), are uploaded from that copy,
and W&B's markers of what was uploaded are then written beside them on the login node too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hpclaunch.errors import HpclaunchError
from hpclaunch.state.runfiles import RunFiles


class SyncFailed(HpclaunchError):
    exit_code = 1


@dataclass
class Segment:
    """One offline W&B run folder: RUN_DIR/wandb/offline-run-<time>-<id>/."""

    path: Path

    @cached_property
    def data(self) -> Path:
        """run-<id>.wandb (looked up once: every property below is a name beside it)."""
        return next(self.path.glob("run-*.wandb"))

    @property
    def run_id(self) -> str:
        return self.data.stem.removeprefix("run-")

    @property
    def marker(self) -> Path:
        """W&B writes it when it uploaded the run."""
        return self.data.with_name(self.data.name + ".synced")

    @property
    def synced(self) -> bool:
        return self.marker.is_file()

    def marked_at(self) -> int | None:
        return self.marker.stat().st_mtime_ns if self.synced else None


@dataclass
class JobRuns:
    label: str  # the job id, or the run directory given
    run_dir: Path
    running: bool = False
    segments: list[Segment] = field(default_factory=list)
    online: int = 0  # W&B runs the job streamed itself (tracking.wandb.mode online): nothing to upload
    remote: Any = None  # a job submitted over SSH: its record (run_dir is then the local copy of its run directory)

    @classmethod
    def at(cls, label: str, run_dir: Path, running: bool = False) -> JobRuns:
        """The W&B runs found in `run_dir`."""
        files = RunFiles(run_dir)
        return cls(label, run_dir, running=running, segments=[Segment(p) for p in files.wandb_offline_runs()],
                   online=len(files.wandb_online_runs()))

    @property
    def run_ids(self) -> list[str]:
        return sorted({s.run_id for s in self.segments})

    def to_upload(self, include_synced: bool) -> list[Segment]:
        todo = [s for s in self.segments if include_synced or not s.synced]
        if self.running and todo and todo[-1] == self.segments[-1]:
            todo.pop()  # still being written
        return todo

    def as_dict(self, include_synced: bool) -> dict[str, Any]:
        todo = self.to_upload(include_synced)
        return {"job": self.label, "run_dir": str(self.run_dir), "running": self.running,
                "wandb_runs": self.run_ids, "online_runs": self.online,
                "segments": [{"path": str(s.path), "synced": s.synced, "upload": s in todo} for s in self.segments]}


def summary(run_dir: Path) -> dict[str, Any] | None:
    """What `status` says of a run's W&B runs (no scheduler call): None when the job has none."""
    runs = JobRuns.at(str(run_dir), run_dir)
    if not runs.segments and not runs.online:
        return None
    return {"run_ids": runs.run_ids, "offline": len(runs.segments),
            "not_uploaded": sum(not s.synced for s in runs.segments), "online": runs.online}


def describe(info: dict[str, Any], job: str) -> str:
    if not info["offline"]:
        return f"{info['online']} online run(s), streamed by the job"
    text = f"run {', '.join(info['run_ids'])}, {info['offline']} offline run(s)"
    if info["not_uploaded"]:
        return f"{text}, {info['not_uploaded']} not uploaded: `hpclaunch sync {job}` from a node with network"
    return f"{text}, all uploaded"


def find(refs: list[str]) -> list[JobRuns]:
    """Each job's offline W&B runs (a sweep's id: each element's). A job id's state comes from its scheduler (one
    call per scheduler); a run directory given by path is taken as ended."""
    from hpclaunch.jobs.state import statuses
    from hpclaunch.state import registry
    from hpclaunch.state.runarchive import open_run
    from hpclaunch.state.sweeps import is_sweep, sweep_elements

    found: list[tuple[str, Path, registry.JobRecord | None]] = []
    for ref in refs:
        run = open_run(ref)
        if run.record is not None and is_sweep(run.record):
            found.extend((r.job_id, Path(r.run_dir), r) for r in sweep_elements(run.record))
        else:
            found.append((run.label, run.run_dir, run.record))
    records = [r for _, _, r in found if r is not None]
    states = statuses(records) if records else {}
    out = []
    for label, run_dir, record in found:
        st = states.get(record.job_id) if record is not None else None
        here = _here(record) if record is not None and record.remote else run_dir
        runs = JobRuns.at(label, here, running=st is not None and not st.finished)
        runs.remote = record if here != run_dir else None
        out.append(runs)
    return out


def _here(record: Any) -> Path:
    """A job submitted over SSH: its run directory's small files, its W&B offline runs with them, copied here
    (jobs/remote.py), where the network and the W&B login are."""
    from hpclaunch.jobs import remote

    return Path(remote.local_view(record).run_dir)


def mark_there(jobs: list[JobRuns], uploaded: list[Segment]) -> None:
    """W&B's markers of the segments uploaded from the copy of a job submitted over SSH, written beside the
    segments in the run directory on the login node too: a later sync, here or there, does not upload them
    again."""
    from hpclaunch.jobs import remote

    for j in jobs:
        done = [s for s in j.segments if s in uploaded]
        if j.remote is None or not done:
            continue
        there = [str(Path(j.remote.run_dir) / s.marker.relative_to(j.run_dir)) for s in done]
        remote.host(j.remote).run(["touch", "--", *there])


def check_found(jobs: list[JobRuns]) -> None:
    """A clear error when no job given has any W&B run."""
    if any(j.segments or j.online for j in jobs):
        return
    names = ", ".join(j.label for j in jobs)
    where = ", ".join(str(RunFiles(j.run_dir).wandb) for j in jobs)
    raise HpclaunchError(f"no offline W&B runs in {names} (looked in {where}): the job ran without tracking.wandb",
                         hint="turn W&B on for the next run with --set tracking.wandb.project=NAME (or a tracking: "
                              "section in the recipe or profile); `hpclaunch report JOB` and TensorBoard "
                              "(RUN_DIR/tensorboard) have this run's metrics")


def upload(jobs: list[JobRuns], *, include_synced: bool = False, project: str | None = None,
           entity: str | None = None) -> list[Segment]:
    """Upload every job's segments still to upload with W&B's uploader; returns those uploaded. Raises SyncFailed
    naming the segments W&B did not mark as synced."""
    from hpclaunch.core.extras import need

    todo = [s for j in jobs for s in j.to_upload(include_synced)]
    if not todo:
        return []
    need("wandb")
    argv = [sys.executable, "-m", "wandb", "sync", "--no-include-online"]
    argv += ["--include-synced"] if include_synced else []
    argv += ["--project", project] if project else []
    argv += ["--entity", entity] if entity else []
    before = {s.path: s.marked_at() for s in todo}
    # in the first run's wandb/ folder: W&B writes its debug-cli log into the current one
    proc = subprocess.run([*argv, *(str(s.path.resolve()) for s in todo)], stdin=subprocess.DEVNULL,
                          cwd=todo[0].path.parent, env=os.environ.copy(), check=False)
    failed = [s for s in todo if s.marked_at() in (None, before[s.path])]  # no marker, or not a new one
    mark_there(jobs, [s for s in todo if s not in failed])
    if failed or proc.returncode != 0:
        shown = "\n  ".join(str(s.path) for s in failed)
        raise SyncFailed(f"W&B did not upload {len(failed)} of {len(todo)} offline run(s) (wandb sync exited "
                         f"{proc.returncode}; its messages are above):\n  {shown}",
                         hint="run `wandb login` on this node (or set WANDB_API_KEY; WANDB_BASE_URL for a "
                              "self-hosted server) and check it reaches the server, then sync again")
    return todo
