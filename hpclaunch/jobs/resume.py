"""`hpclaunch resume JOB`: a job that was cancelled, failed, timed out or was preempted goes on from its newest
checkpoint as a new job, recorded as the old one's continuation.

The new job is the same job script queued again in the same run directory: it reads the same resolved.yaml,
and the runtime resumes from RUN_DIR/checkpoints/step-* by itself, as after a requeue. Its restarts are
numbered after every one the run directory has seen (HPCLAUNCH_RESTART, as a `submit --retries`
resubmission's), so its logs stay apart; its record says which job it resumes (`resumes`), and the run
directory's chain of jobs (RUN_DIR/retries.jsonl, an entry with ``"resume": true``) links the old job to it, so
`status` and `jobs` show the chain as they show retries. `--from-scratch` starts the resolved.yaml over in a new
run directory instead (for a job with no checkpoint, or a script that does not resume), linked the same way.

A job chain is followed to its newest job first: resuming a job that was retried or resumed before continues
from the newest of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.jobs.state import retries, statuses
from hpclaunch.schedulers import JobStatus, get_scheduler
from hpclaunch.state import registry, timeline
from hpclaunch.state.runfiles import RunFiles, append_once
from hpclaunch.state.sweeps import is_sweep


class CannotResume(ConfigError):
    """The job cannot be resumed (still running, completed, no checkpoint); the message says why and what to do."""


@dataclass(frozen=True)
class Resumed:
    """What `resume` queued: the new job, the job it continues, where it runs and from which checkpoint."""

    job_id: str
    resumes: str  # the job it continues (the newest of the chain named)
    state: str  # how that job ended
    run_dir: Path
    checkpoint: Path | None  # None: from scratch
    step: int | None
    restart: int  # the new job's first restart number (its logs: rank-<R>.restart-<N>.log)
    from_scratch: bool = False

    @property
    def script(self) -> Path:
        return RunFiles(self.run_dir).script

    @property
    def message(self) -> str:
        where = ("from scratch in a new run directory" if self.from_scratch
                 else f"from its checkpoint at step {self.step} ({self.checkpoint}), restart {self.restart}")
        return f"resumed job {self.resumes} ({self.state}) as job {self.job_id}, {where}"

    @property
    def link(self) -> dict[str, Any]:
        """What the new job's record says it resumes (`resumes`, as `status --json` shows it)."""
        return {"job": self.resumes, "checkpoint": str(self.checkpoint) if self.checkpoint else None,
                "step": self.step, "restart": self.restart, "from_scratch": self.from_scratch}

    def to_dict(self) -> dict[str, Any]:
        """`resume --json`: the new job, its run directory, how the job it resumes ended, and the record's link."""
        return {"job_id": self.job_id, "run_dir": str(self.run_dir), "resumed_state": self.state,
                "resumes": self.link}


def newest(job_id: str) -> tuple[registry.JobRecord, str]:
    """(the record whose run directory holds the newest job of `job_id`'s chain, that job's id): retries and
    resumes followed, across run directories (a resume from scratch has its own)."""
    record = registry.get(job_id)
    seen = {record.job_id}
    while True:
        chain = retries(record, _remote_copy(record))
        last = str(chain[-1]["to"]) if chain else record.job_id
        try:
            later = registry.get(last)
        except HpclaunchError:
            return record, last
        if later.run_dir == record.run_dir or later.job_id in seen:
            return record, last
        seen.add(later.job_id)
        record = later


def _check_state(named: str, last: str, status: JobStatus, files: RunFiles) -> None:
    which = f"job {named}" if last == named else f"job {last} (the newest of job {named}'s chain)"
    if status.state == "COMPLETED":
        raise CannotResume(f"{which} COMPLETED: it ran to its end, there is nothing to resume",
                           hint=f"to run it again from the start: hpclaunch submit {files.resolved}")
    if status.state == "SUBMITTING":
        raise CannotResume(f"{which} is still being handed to the scheduler", hint="`hpclaunch jobs` in a moment")
    if not status.finished and status.state != "UNKNOWN":  # UNKNOWN: not queued, the scheduler forgot how it ended
        raise CannotResume(f"{which} is still {status.state}: it has not stopped yet",
                           hint=f"wait for it to end (`hpclaunch status {last}`), or stop it first: "
                                f"hpclaunch cancel {last}")


def resume(job_id: str, *, from_scratch: bool = False, exclude: Sequence[str] = ()) -> Resumed:
    """Queue the newest job of `job_id`'s chain again from its newest checkpoint (see the module's docstring),
    without the nodes `exclude`. CannotResume (exit 2) for a job still queued or running, one that
    completed, one with no checkpoint or whose script does not resume (unless `from_scratch`)."""
    if from_scratch and registry.get(job_id).remote:
        raise CannotResume(f"job {job_id} was submitted over SSH (docs/remote.md): --from-scratch does not start "
                           "it over on the login node yet", hint="submit its recipe again, from here")
    record, last = newest(job_id)
    if is_sweep(record):
        elements = ", ".join((record.sweep or {}).get("elements", [])[:3])
        raise CannotResume(f"{job_id} is a sweep: resume its elements one by one",
                           hint=f"hpclaunch resume ELEMENT (its elements: {elements}, ...; `hpclaunch status "
                                f"{job_id}` lists them)")
    files = RunFiles(_view(record))
    if not files.script.is_file() or not files.resolved.is_file():
        raise CannotResume(f"job {last}'s run directory {files.root} no longer holds its job script and "
                           "resolved.yaml (removed by `hpclaunch clean`?)", hint="submit the recipe again")
    status = statuses([record], {record.job_id: files.root}).get(last) or JobStatus(last, "UNKNOWN")
    _check_state(job_id, last, status, files)
    if from_scratch:
        return _from_scratch(last, status, files, exclude)
    resolved = _resolved(files)
    if not resolved.get("resumable", True):
        raise CannotResume(f"job {last} runs a script that does not resume from a checkpoint (its "
                           "checkpoint.resumable is false): queued again, it would start over in the same run "
                           "directory", hint=f"hpclaunch resume {job_id} --from-scratch (a new run directory)")
    newest_checkpoint = files.latest_checkpoint()
    if newest_checkpoint is None:
        raise CannotResume(f"job {last} ({status.state}) wrote no checkpoint ({files.checkpoints} holds no step-*): "
                           "there is nothing to resume from",
                           hint=f"start it over from its resolved.yaml: hpclaunch resume {job_id} --from-scratch")
    step, checkpoint = newest_checkpoint
    return _queue_again(record, last, status, files, (step, checkpoint), exclude)


def _queue_again(record: registry.JobRecord, last: str, status: JobStatus, files: RunFiles,
                 newest_checkpoint: tuple[int, Path], exclude: Sequence[str]) -> Resumed:
    """The job script queued again in its run directory (on the login node for a job submitted over SSH: `files`
    is then the local view of it, `there` the login node's path of one of its files), recorded as `last`'s
    continuation."""
    root = Path(record.run_dir)

    def there(path: Path) -> Path:
        return root / path.relative_to(files.root)

    step, checkpoint = newest_checkpoint[0], there(newest_checkpoint[1])
    scheduler = get_scheduler(record.scheduler, record.remote)
    scheduler.check_available()
    restart = max(files.next_restart(), 1)  # 1 at least: a first start (0) is the old job's
    link = Resumed("", last, status.state, root, checkpoint, step, restart).link
    # the old job's record as the new one's (a sweep's element goes on as a job of its own)
    pending = registry.begin(replace(record, submitted_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), sweep=None,
                                     resumes=link))
    asked = time.time()
    try:
        new_id = scheduler.resubmit(there(files.script), root, restart=restart, exclude=exclude)
    except BaseException:
        pending.abandon()
        raise
    if record.remote:
        _record_remote(record, new_id, asked, restart, _chain_entry(last, new_id, link, asked))
    else:
        timeline.submitted(files.root, new_id, asked, restart)
        _chain(files, last, new_id, link, asked)
    pending.complete(new_id)
    return Resumed(new_id, last, status.state, root, checkpoint, step, restart)


def _remote_copy(record: registry.JobRecord) -> Path | None:
    """Where the files of a job submitted over SSH are read here (a fresh copy of its small files); None for
    any other job (its run directory)."""
    from hpclaunch.jobs import remote

    return remote.local_copy(record) if record.remote else None


def _view(record: registry.JobRecord) -> Path:
    """The run directory as resume reads it: itself, or for a job submitted over SSH its view from here."""
    from hpclaunch.jobs import remote

    return remote.resume_view(record) if record.remote else Path(record.run_dir)


def _record_remote(record: registry.JobRecord, new_id: str, asked: float, restart: int, entry: dict[str, Any]) -> None:
    """The timeline's stamp and the chain's line of a resume over SSH, appended in the run directory there. The
    job is queued by now: a line that cannot be written is left out (its record says what it resumes)."""
    from hpclaunch.errors import CommandError
    from hpclaunch.jobs import remote

    files = RunFiles(Path(record.run_dir))
    try:
        remote.append(record, files.timeline, timeline.line("submitted", restart, new_id, asked))
        remote.append(record, files.retries, json.dumps(entry) + "\n")
    except CommandError:
        pass


def _from_scratch(last: str, status: JobStatus, files: RunFiles, exclude: Sequence[str]) -> Resumed:
    """The resolved.yaml submitted again into a new run directory, recorded as the continuation of `last`."""
    from hpclaunch.submission import submit as submission
    from hpclaunch.submission.resolve import CliOverrides, resolve_again

    spec = resolve_again(str(files.resolved), CliOverrides(exclude=tuple(exclude)))
    link = Resumed("", last, status.state, files.root, None, None, 0, from_scratch=True).link
    done = submission.submit(spec, resumes=link)
    assert done.job_id is not None
    _chain(files, last, done.job_id, link, time.time())
    return Resumed(done.job_id, last, status.state, done.run_dir, None, None, 0, from_scratch=True)


def _resolved(files: RunFiles) -> dict[str, Any]:
    from hpclaunch.config.loader import read_yaml

    try:
        return read_yaml(files.resolved)
    except HpclaunchError as exc:
        raise CannotResume(f"{files.resolved} cannot be read: {exc.message}", hint=exc.hint) from None


def _chain_entry(last: str, new_id: str, link: dict[str, Any], at: float) -> dict[str, Any]:
    return {"from": last, "to": new_id, "resume": True, "checkpoint": link["checkpoint"], "step": link["step"],
            "from_scratch": link["from_scratch"], "at": int(at)}


def _chain(files: RunFiles, last: str, new_id: str, link: dict[str, Any], at: float) -> None:
    """The old run directory's chain of jobs: `last` went on as `new_id`. The job is queued by now: a line
    that cannot be written is left out (its record still says what it resumes)."""
    entry = _chain_entry(last, new_id, link, at)
    try:
        append_once(files.retries, (json.dumps(entry) + "\n").encode())
    except OSError:
        pass
