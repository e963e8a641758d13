"""Where jobs stand: the recorded jobs (`records`, settling the records of interrupted submits), one job's or the
newest jobs' state with everything known about them (`status`, `jobs`), and `cancel`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.api.results import Listed

if TYPE_CHECKING:
    from hpclaunch.jobs.cancel import Cancelled
    from hpclaunch.jobs.view import JobView
    from hpclaunch.schedulers.base import JobStatus
    from hpclaunch.state.registry import JobRecord

RECENT = 10  # `status` without a job: this many of the newest jobs


def records() -> Listed[JobRecord]:
    """Every recorded job, after settling the pending records of interrupted submits (asking the scheduler
    whether it took the job); an unreadable record is skipped, each with a note."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.state import registry

    def find_job(record: JobRecord) -> str | None:
        return get_scheduler(record.scheduler, record.remote).find_job(Path(record.run_dir))

    notes = [f"hpclaunch: warning: {line}" for line in registry.recover(find_job)]
    bad: list[registry.RegistryError] = []
    found = registry.all_records(bad)
    notes += [f"hpclaunch: warning: skipped {exc.message} ({exc.hint})" for exc in bad]
    return Listed(found, tuple(notes))


def recorded() -> list[JobRecord]:
    """Every job record as it is, unsettled and without asking the scheduler (shell completion)."""
    from hpclaunch.state import registry

    return registry.all_records()


@dataclass(frozen=True)
class Status:
    """`status`: the views of the jobs asked about (jobs/view.py) and what was said; `one`: a job was named (its
    JSON is that job's object, else the list)."""

    views: list[JobView]
    one: bool = False
    notes: tuple[str, ...] = ()

    def to_json(self) -> Any:
        data = [v.to_dict() for v in self.views]
        return data[0] if self.one else data


def status(job: str | None = None, *, all_jobs: bool = False) -> Status:
    """JOB's state and everything known about it (a sweep: with its elements); without JOB, the RECENT newest
    jobs (`all_jobs`: every one). One scheduler call for all of them."""
    from hpclaunch.jobs.view import views
    from hpclaunch.state import registry
    from hpclaunch.state.sweeps import grouped, sweep_elements

    if job:
        one = registry.get(job)
        return Status(views([(one, sweep_elements(one))]), one=True)
    listed = records()
    groups = grouped(listed.items)
    notes = list(listed.notes)
    if not all_jobs and len(groups) > RECENT:
        notes.append(f"hpclaunch: the {RECENT} newest of {len(groups)} jobs (`hpclaunch status --all` for all)")
        groups = groups[-RECENT:]
    return Status(views(groups), notes=tuple(notes))


def jobs(limit: int = 20) -> Listed[JobView]:
    """The `limit` newest jobs (0: all), oldest first, each with its state, elapsed time and last metrics."""
    from hpclaunch.jobs.view import views
    from hpclaunch.state.sweeps import grouped

    listed = records()
    groups = grouped(listed.items)
    return Listed(views(groups[-limit:] if limit > 0 else groups), listed.notes)


def states(job_ids: Sequence[str], scheduler: str) -> dict[str, JobStatus]:
    """The scheduler's view of these jobs (of one scheduler: a sweep's elements) now, in one call."""
    from hpclaunch.schedulers import get_scheduler

    return get_scheduler(scheduler).status(list(job_ids))


@dataclass(frozen=True)
class Cancellation:
    """`cancel`: what happened to each job asked (cancelled, or how and when it had already ended)."""

    jobs: list[Cancelled]

    def to_json(self) -> dict[str, Any]:
        return {"jobs": [c.to_dict() for c in self.jobs]}


def cancel(jobs: Sequence[str]) -> Cancellation:
    """Cancel each job (every step and the batch script; a sweep's id: every element). A job that has already
    ended is left alone and said so. Every id is checked before anything is cancelled."""
    from hpclaunch.jobs.cancel import cancel as cancel_jobs

    return Cancellation(cancel_jobs(list(jobs)))
