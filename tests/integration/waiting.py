"""Time budgets for the integration tests that do not count the time a job waits in the queue for nodes.

The suite runs on several xdist workers at once (scripts/test.sh), so a test's job may wait PENDING while other
tests' jobs hold the dev cluster's nodes, and wait again after a requeue (reason BeginTime: Slurm holds a requeued
job back before it may start again). A test's timeout is about what its job does, not about the queue:

    deadline = Deadline(240, jobs=[job])
    while not ranks_started():
        deadline.check("the ranks did not start")
        time.sleep(1)

`Deadline.check` fails the test once `seconds` of its own time have passed, the time any of `jobs` spent queued for
nodes not counted (asked of squeue at most every QUEUE_POLL_S: the time between two looks counts as queued when the
first look found a job queued; up to QUEUE_CEILING_S in all)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable

# Reasons a job waits for nodes other jobs hold, or for its requeue delay; not one a test itself caused (Dependency,
# a hold, a limit).
QUEUED_FOR_NODES = frozenset({"Resources", "Priority", "None", "", "BeginTime", "ReqNodeNotAvail",
                              "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_"
                              "partitions"})
QUEUE_CEILING_S = 1800.0  # the most queued time a test may add to its own timeout
QUEUE_POLL_S = 5.0
LONG_S = 1800.0  # for a subprocess that follows a job to its end (`submit --follow`, `logs --follow`): the job's queue
                 # time is in it; a hung run is still ended, and the CI's own timeout stays above


def queued_for_nodes(jobs: Iterable[str]) -> bool:
    """Whether any of `jobs` (Slurm job ids) is PENDING for nodes now (squeue; a job it no longer lists is not)."""
    ids = [j for j in jobs if j and j.split("_")[0].isdigit()]
    if not ids:
        return False
    out = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%T|%r"], capture_output=True, text=True,
                         timeout=60).stdout
    return any(state == "PENDING" and reason in QUEUED_FOR_NODES
               for state, _, reason in (line.partition("|") for line in out.splitlines()))


class Deadline:
    """`seconds` of a test's own time, plus the time `jobs` spend queued for nodes (see the module's docstring)."""

    def __init__(self, seconds: float, jobs: Iterable[str] = ()) -> None:
        self.seconds = seconds
        self.jobs = list(jobs)
        self.queued = 0.0
        now = time.monotonic()
        self._end, self._asked, self._was_queued = now + seconds, now, queued_for_nodes(self.jobs)

    def watch(self, job: str) -> None:
        """Count this job's queue time too (a follow-on or a retry of the first job)."""
        if job not in self.jobs:
            self.jobs.append(job)

    def expired(self) -> bool:
        now = time.monotonic()
        if now - self._asked >= QUEUE_POLL_S or now > self._end:
            if self._was_queued and self.queued < QUEUE_CEILING_S:  # queued since the last look: not counted
                self.queued += now - self._asked
                self._end += now - self._asked
            self._asked, self._was_queued = now, queued_for_nodes(self.jobs)
        return now > self._end

    def check(self, what: str) -> None:
        assert not self.expired(), f"{what} in {self.seconds:g} s (+{self.queued:.0f} s queued for nodes)"


def start_now(job: str, timeout: float = 120) -> None:
    """After `scontrol requeue JOB`: let it start again now, as an operator would (`scontrol update StartTime=now`),
    instead of sitting out the delay Slurm gives a requeued job (reason BeginTime). Slurm refuses the update while the
    job still ends its run (COMPLETING): asked again until it takes."""
    deadline = Deadline(timeout, [job])
    while subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True).returncode:
        deadline.check(f"job {job} was not pending again after its requeue")
        time.sleep(0.5)
