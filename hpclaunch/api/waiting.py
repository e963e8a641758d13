"""`wait`: block until a job reaches a state, changes state, or ends, or until a timeout: one call instead of a
polling loop (`hpclaunch wait`, the MCP wait tool). It asks the scheduler every few seconds, less often the
longer nothing changes, and tells `on_change` (progress for an agent) each state it sees."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.schedulers.base import JobStatus

END, CHANGE = "end", "change"
STATES = ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
          "OUT_OF_MEMORY")
UNTIL = (END, CHANGE, *STATES)
POLL_S, POLL_MAX_S = 2.0, 15.0  # the first interval between scheduler calls, and the longest after a quiet spell
EXIT = {"reached": 0, "ended": 1, "timeout": 124}  # `hpclaunch wait`'s exit code by outcome (124 as timeout(1))


@dataclass(frozen=True)
class Waited:
    """How a wait ended: `outcome` "reached" (what it waited for happened; a job that ended COMPLETED counts),
    "ended" (the job ended otherwise, e.g. FAILED, without reaching it) or "timeout" (the job is still on its way);
    the states it saw with the second each was first seen; the job's status at the end."""

    job_id: str
    until: str
    outcome: str
    waited_s: float
    seen: list[dict[str, Any]]
    status: JobStatus = field(repr=False)

    @property
    def state(self) -> str:
        return self.status.state

    @property
    def exit_code(self) -> int:
        return EXIT[self.outcome]

    def to_json(self) -> dict[str, Any]:
        s = self.status
        return {"job_id": self.job_id, "state": s.state, "until": self.until, "outcome": self.outcome,
                "finished": s.finished, "waited_s": round(self.waited_s, 1), "seen": self.seen, "reason": s.reason,
                "reason_text": s.reason_text, "exit_code": s.exit_code, "nodes": s.nodes, "elapsed": s.elapsed}


def check_until(until: str) -> str:
    """`until` in capitals where it is a state; a ConfigError for anything wait cannot wait for."""
    word = until.upper() if until.upper() in STATES else until.lower()
    if word not in UNTIL:
        raise ConfigError(f"--until {until!r}: not a state wait knows", key="--until",
                          hint=f"one of {', '.join(UNTIL)} (end: any end; change: the next change of state)")
    return word


def wait(job: str, until: str = END, timeout: float | None = None, *,
         on_change: Callable[[JobStatus, float], None] | None = None,
         on_poll: Callable[[JobStatus, float], None] | None = None, poll: float = POLL_S,
         poll_max: float = POLL_MAX_S) -> Waited:
    """Block until JOB reaches `until` (a state; "end": any end; "change": a state other than the one it has
    now) or ends, or `timeout` seconds have passed (None: no limit). `on_change(status, seconds)` is called with
    each state seen, the first included; `on_poll(status, seconds)` after every call to the scheduler (progress).
    JobLost when the scheduler stops knowing the job."""
    from hpclaunch.api.job import still_known
    from hpclaunch.jobs.state import statuses
    from hpclaunch.state import registry

    until = check_until(until)
    if timeout is not None and timeout < 0:
        raise ConfigError(f"--timeout {timeout:g}: must be 0 or more seconds", key="--timeout")
    record = registry.get(job)
    start = time.monotonic()
    seen: list[dict[str, Any]] = []
    first: str | None = None
    unknown, interval = 0, poll
    while True:
        now = statuses([record])[record.job_id]
        waited = time.monotonic() - start
        if not seen or seen[-1]["state"] != now.state:
            seen.append({"state": now.state, "at_s": round(waited, 1)})
            interval = poll
            if on_change is not None:
                on_change(now, waited)
        if on_poll is not None:
            on_poll(now, waited)
        first = first or now.state
        unknown = still_known(unknown, now.state == "UNKNOWN", record.job_id)
        outcome = _outcome(until, first, now)
        if outcome is None and timeout is not None and waited >= timeout:
            outcome = "timeout"
        if outcome is not None:
            return Waited(record.job_id, until, outcome, waited, seen, now)
        left = None if timeout is None else timeout - waited
        time.sleep(interval if left is None else max(0.0, min(interval, left)))
        interval = min(poll_max, interval * 1.5)


def _outcome(until: str, first: str, now: JobStatus) -> str | None:
    """"reached", "ended" or None (keep waiting) for a job now in `now`, first seen in `first`."""
    if until == now.state or (until == CHANGE and now.state not in (first, "UNKNOWN")):
        return "reached"
    if now.finished:
        return "reached" if until in (END, CHANGE) and now.state == "COMPLETED" else "ended"
    return None
