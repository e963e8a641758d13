"""Cancelling jobs (`hpclaunch cancel JOB...`): every id is looked up before anything is cancelled (an unknown
id cancels nothing), each scheduler is asked once for the state of its jobs, and a job that has already ended
is left alone and reported with its state and when it ended. A sweep's id cancels the whole sweep (its job
array); an element's id only that element."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hpclaunch.errors import HpclaunchError
from hpclaunch.jobs.state import statuses
from hpclaunch.schedulers import JobStatus, get_scheduler
from hpclaunch.state import registry
from hpclaunch.state.sweeps import is_sweep


@dataclass(frozen=True)
class Cancelled:
    """What `cancel` did to one job."""

    job_id: str
    cancelled: bool  # False: it had already ended
    state: str  # its state before: RUNNING, PENDING, ... or how it ended (COMPLETED, FAILED, ...)
    ended: str | None = None  # when it ended, where the scheduler says (only when it had already ended)
    elements: int = 0  # a sweep: how many elements it has

    @property
    def message(self) -> str:
        what = f"sweep {self.job_id} ({self.elements} elements)" if self.elements else f"job {self.job_id}"
        if self.cancelled:
            return f"cancelled {what} (it was {self.state})"
        when = f" at {self.ended}" if self.ended else ""
        return f"{what} had already ended: {self.state}{when}; nothing to cancel"

    def to_dict(self) -> dict[str, object]:
        return {"job_id": self.job_id, "cancelled": self.cancelled, "already_ended": not self.cancelled,
                "state": self.state, "ended": self.ended, "sweep": bool(self.elements)}


def records(job_ids: Sequence[str]) -> list[registry.JobRecord]:
    """The records of `job_ids`, each once, in the order given; NotFoundError for the first unknown id."""
    out: dict[str, registry.JobRecord] = {}
    for job_id in job_ids:
        record = registry.get(job_id)
        if record.pending:
            raise HpclaunchError(f"{record.job_id} is still being handed to the scheduler; it has no job id yet",
                                 hint="run `hpclaunch jobs` in a moment and cancel the job id it shows")
        out.setdefault(record.job_id, record)
    return list(out.values())


def cancel(job_ids: Sequence[str]) -> list[Cancelled]:
    """Cancel each job that has not ended yet; report the others as already ended."""
    found = records(job_ids)
    states = statuses(found)
    out = []
    for r in found:
        s = states.get(r.job_id) or JobStatus(r.job_id, "UNKNOWN")
        elements = len((r.sweep or {}).get("elements", [])) if is_sweep(r) else 0
        if s.finished:
            out.append(Cancelled(r.job_id, False, s.state, s.ended, elements))
            continue
        get_scheduler(r.scheduler, r.remote).cancel(r.job_id)
        out.append(Cancelled(r.job_id, True, s.state, None, elements))
    return out
