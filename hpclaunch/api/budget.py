"""The queue budget of a coding agent (a profile's `agents.max_pending` and `agents.max_running`): an agent's
submit beyond it is refused, naming the budget, before anything is written. What an agent "keeps adding pending
jobs" runs into."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpclaunch.errors import LimitError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

NEWEST = 200  # only the newest records are asked about: an agent's jobs in the queue are among them


def check_budget(spec: JobSpec, adding: int = 1) -> None:
    """LimitError when this profile already has agents.max_pending jobs waiting in the queue, or
    agents.max_running running (the jobs recorded under this account's HPCLAUNCH_HOME)."""
    budget = spec.profile.agents
    if budget.max_pending is None and budget.max_running is None:
        return
    from hpclaunch.api.tracking import records
    from hpclaunch.jobs.state import statuses
    from hpclaunch.state.sweeps import is_sweep

    mine = [r for r in records().items[-NEWEST:] if r.profile == spec.profile.name and not is_sweep(r)]
    found = statuses(mine) if mine else {}
    held = {state: [r.job_id for r in mine if found[r.job_id].state == state] for state in ("PENDING", "RUNNING")}
    over = {"PENDING": budget.max_pending is not None and len(held["PENDING"]) + adding > budget.max_pending,
            "RUNNING": budget.max_running is not None and len(held["RUNNING"]) >= budget.max_running}
    for state, key, limit in (("PENDING", "agents.max_pending", budget.max_pending),
                              ("RUNNING", "agents.max_running", budget.max_running)):
        if over[state]:
            ids = held[state]
            raise LimitError(f"{spec.profile.name}: {key} is {limit} and {len(ids)} job(s) of this profile are "
                             f"{state} ({', '.join(ids[:8]) or 'none'}{' ...' if len(ids) > 8 else ''}): this submit "
                             "is refused", hint="wait for one to end (the wait tool, `hpclaunch wait JOB`) or cancel "
                                                f"one; the budget is the profile's {key}")
