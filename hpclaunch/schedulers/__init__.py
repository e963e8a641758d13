"""Where a rendered job script runs: Slurm, or this machine (local)."""

from __future__ import annotations

from hpclaunch.schedulers.base import JobStatus, Scheduler
from hpclaunch.schedulers.local import LocalScheduler
from hpclaunch.schedulers.slurm import SlurmScheduler

SCHEDULERS: dict[str, type[Scheduler]] = {"slurm": SlurmScheduler, "local": LocalScheduler}


def get_scheduler(name: str) -> Scheduler:
    return SCHEDULERS[name]()


__all__ = ["JobStatus", "Scheduler", "SCHEDULERS", "get_scheduler"]
