"""`Job`: a submitted job (or sweep, or a dry run's run directory) and what can be asked of it; ``job(ID)``
finds a recorded one. See docs/python-api.md."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from hpclaunch.errors import HpclaunchError
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.jobs.cancel import Cancelled
    from hpclaunch.plan.promise import Promise
    from hpclaunch.schedulers.base import JobStatus
    from hpclaunch.state.registry import JobRecord
    from hpclaunch.submission.sweep import SweepSubmission

UNKNOWN_LIMIT = 10  # polls in a row that the scheduler does not know the job before `wait` gives up


class JobTimeout(HpclaunchError):
    """`Job.wait(timeout=...)` ran out of time; the job still runs."""

    exit_code = 1


@dataclass(frozen=True)
class Job:
    """A submitted job (or sweep, or a dry run's run directory). `spec` and `warnings` are known for a job
    submitted in this process; `hpclaunch.job(ID)` gives one from its record."""

    job_id: str | None  # None for a dry run
    run_dir: Path  # a sweep's folder for a sweep
    script: Path
    spec: JobSpec | None = field(default=None, repr=False)
    warnings: tuple[str, ...] = ()
    sweep: SweepSubmission | None = field(default=None, repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)  # what submit says besides the id (api/notes.py)

    def element_script(self, index: int = 0) -> Path:
        """The job script of a sweep's element (the sweep's own script hands over to it)."""
        if self.sweep is None:
            return self.script
        return RunFiles(self.sweep.elements[index].run_dir).script

    def to_dict(self) -> dict[str, Any]:
        """What `submit --json` prints: job_id (None for a dry run), run_dir, script, layout, profile, recipe, promise
        (the goodput promised: Promise.to_json, or None); a sweep's: its sweep_dir, keys, max_parallel and elements
        (job_id, index, values, run_dir)."""
        if self.sweep is not None:
            done, first = self.sweep, self.sweep.elements[0].spec
            return {"job_id": done.job_id, "sweep_dir": str(done.sweep_dir), "script": str(done.script_path),
                    "layout": first.layout, "profile": first.profile.name, "recipe": first.recipe.name,
                    "keys": list(done.keys), "max_parallel": done.max_parallel,
                    "elements": [{"job_id": done.element_id(e.index) if done.job_id else None, "index": e.index,
                                  "values": e.values, "run_dir": str(e.run_dir)} for e in done.elements]}
        spec, promise = self.spec, self.promise
        return {"job_id": self.job_id, "run_dir": str(self.run_dir), "script": str(self.script),
                "layout": spec.layout if spec else None, "profile": spec.profile.name if spec else None,
                "recipe": spec.recipe.name if spec else None, "promise": promise.to_json() if promise else None}

    @property
    def promise(self) -> Promise | None:
        """The goodput the job was promised at submit and the best checkpoint interval (RUN_DIR/promise.json,
        docs/troubleshooting.md#a-promise-at-submit); None for a sweep or a job promised nothing."""
        from hpclaunch.submission import measured

        return None if self.sweep is not None else measured.read(self.run_dir)

    # --- the job's record and state
    def _record(self) -> JobRecord:
        from hpclaunch.state import registry

        if self.job_id is None:
            raise HpclaunchError(f"a dry run submitted nothing (run directory {self.run_dir})",
                                 hint="submit it: hpclaunch.submit(..., dry_run=False)")
        return registry.get(self.job_id)

    @property
    def is_sweep(self) -> bool:
        from hpclaunch.state.sweeps import is_sweep

        return self.sweep is not None or (self.job_id is not None and is_sweep(self._record()))

    @property
    def elements(self) -> list[Job]:
        """A sweep's elements, in order ([] for a job that is no sweep)."""
        from hpclaunch.state.sweeps import sweep_elements

        if self.job_id is None:
            return []
        return [_from_record(r) for r in sweep_elements(self._record())]

    def status(self) -> JobStatus:
        """The scheduler's view now: state (PENDING, RUNNING, COMPLETED, FAILED, ...), reason, exit code,
        nodes, elapsed."""
        from hpclaunch.jobs.state import statuses

        record = self._record()
        return statuses([record])[record.job_id]

    def wait(self, timeout: float | None = None, *, poll: float = 2.0) -> JobStatus:
        """Block until the job (every element of a sweep) has ended; its final status. It does not raise for a
        failed job: look at ``.state``. Raises JobTimeout after `timeout` seconds, JobLost when the scheduler
        stops knowing it."""
        from hpclaunch.jobs.state import statuses
        record = self._record()
        watched = [record, *[e._record() for e in self.elements]]
        deadline = None if timeout is None else time.monotonic() + timeout
        unknown = 0
        while True:
            found = statuses(watched)
            unknown = still_known(unknown, any(s.state == "UNKNOWN" for s in found.values()), record.job_id)
            if all(found[r.job_id].finished for r in watched[1:] or watched):
                return found[record.job_id] if len(watched) == 1 else _sweep_status(record.job_id, found, watched)
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(f"job {record.job_id} is still {found[record.job_id].state} after {timeout:g} s",
                                 hint="wait longer, or job.cancel()")
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def cancel(self) -> Cancelled:
        """Cancel the job (every step and the batch script; a sweep: every element), as `hpclaunch cancel`
        does: a job that has already ended is left alone, and the result says how and when it ended."""
        from hpclaunch.jobs.cancel import cancel

        (done,) = cancel([self._record().job_id])
        return done

    def resume(self, *, from_scratch: bool = False, exclude: Sequence[str] = ()) -> Job:
        """The job, stopped (cancelled, failed, timed out), again from its newest checkpoint as a new job recorded
        as its continuation, as `hpclaunch resume` does (hpclaunch/jobs/resume.py); the new job."""
        from hpclaunch.jobs.resume import resume

        done = resume(self._record().job_id, from_scratch=from_scratch, exclude=exclude)
        return Job(done.job_id, done.run_dir, done.script)

    # --- what the job wrote
    def logs(self, rank: int | None = None, *, tail: int | None = None) -> str:
        """The rank logs merged (each line prefixed with ``[rank<R>]``, every restart in order), then the job
        script's own output; with `rank`, only that rank's lines."""
        from hpclaunch.logs.read import batch_lines, merged

        files = RunFiles(self.run_dir)
        lines = [line.prefixed() for line in merged(files.rank_logs(rank=rank), tail=tail)]
        if rank is None:
            lines += [line.prefixed() for line in batch_lines(files.job_outputs(), tail=tail)]
        return "\n".join(lines) + ("\n" if lines else "")

    @overload
    def metrics(self, rank: int = 0, *, kind: Literal["train", "eval", "all"] = "train",
                as_frame: Literal[False] = False) -> list[dict[str, Any]]: ...

    @overload
    def metrics(self, rank: int = 0, *, kind: Literal["train", "eval", "all"] = "train",
                as_frame: Literal[True]) -> Any: ...

    def metrics(self, rank: int = 0, *, kind: Literal["train", "eval", "all"] = "train",
                as_frame: bool = False) -> list[dict[str, Any]] | Any:
        """The metrics `rank` wrote: training records (one per step; the last of a step written twice across a
        requeue wins), eval records, or all; a pandas DataFrame with ``as_frame=True``."""
        from hpclaunch.report.metrics import load_run

        m = load_run(self.run_dir, self.job_id or "(dry run)", rank)
        records = {"train": m.train, "eval": m.evals, "all": [*m.train, *m.evals]}[kind]
        if not as_frame:
            return records
        try:
            import pandas
        except ImportError:
            raise HpclaunchError("metrics(as_frame=True) needs pandas, which is not installed",
                                 hint="pip install pandas, or call metrics() for a list of dicts") from None
        return pandas.DataFrame(records)

    def provenance(self) -> dict[str, Any]:
        """What the run ran with (RUN_DIR/provenance.json; {} before anything wrote it)."""
        from hpclaunch.state.provenance import load

        return load(self.run_dir)

    def describe(self) -> dict[str, Any]:
        """Everything `hpclaunch status JOB --json` prints (record, status, reason in words, retries, last
        metrics, timeline, provenance line, W&B; a sweep's elements): one view, shared with the CLI."""
        from hpclaunch.jobs.view import views
        from hpclaunch.state.sweeps import sweep_elements

        record = self._record()
        (view,) = views([(record, sweep_elements(record))])
        return view.to_dict()


def still_known(unknown: int, now_unknown: bool, job_id: str) -> int:
    """The count of scheduler answers in a row that did not know the job, after one more; JobLost at
    UNKNOWN_LIMIT (a wait that polls gives up rather than wait forever for a job nobody knows)."""
    unknown = unknown + 1 if now_unknown else 0
    if unknown >= UNKNOWN_LIMIT:
        from hpclaunch.logs.follow import JobLost

        raise JobLost(f"job {job_id}: the scheduler no longer knows it ({unknown} checks in a row)",
                      hint=f"`hpclaunch status {job_id}` shows what is known")
    return unknown


def _sweep_status(sweep_id: str, found: dict[str, JobStatus], watched: list[JobRecord]) -> JobStatus:
    """A sweep's status once every element has ended: COMPLETED when all did, else the first other state."""
    from hpclaunch.schedulers.base import JobStatus

    bad = [found[r.job_id] for r in watched[1:] if found[r.job_id].state != "COMPLETED"]
    return JobStatus(sweep_id, bad[0].state if bad else "COMPLETED", exit_code=bad[0].exit_code if bad else None,
                     source=found[watched[0].job_id].source)


def _from_record(record: JobRecord) -> Job:
    from hpclaunch.state.runfiles import SweepFiles
    from hpclaunch.state.sweeps import is_sweep

    run_dir = Path(record.run_dir)
    script = SweepFiles(run_dir).script if is_sweep(record) else RunFiles(run_dir).script
    return Job(record.job_id, run_dir, script)


def job(job_id: str) -> Job:
    """A recorded job (or sweep, or sweep element) by its id, as `hpclaunch status` shows it."""
    from hpclaunch.state import registry

    return _from_record(registry.get(job_id))
