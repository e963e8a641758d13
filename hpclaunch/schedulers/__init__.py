"""Where a rendered job script runs: Slurm, or this machine (local). Looked up by name in the table in
hpclaunch/core/backends.py, which the profile validation uses too; a backend's module is imported only when it is
used."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from hpclaunch.core.backends import SCHEDULER_NAMES, SCHEDULERS
from hpclaunch.errors import NotFoundError
from hpclaunch.schedulers.base import JobStatus

if TYPE_CHECKING:
    from hpclaunch.schedulers.base import Scheduler



def get_scheduler(name: str) -> Scheduler:
    if name not in SCHEDULERS:
        raise NotFoundError("scheduler", name, SCHEDULERS)
    module, cls = SCHEDULERS[name].split(":")
    scheduler: Scheduler = getattr(import_module(module), cls)()
    return scheduler


__all__ = ["JobStatus", "SCHEDULERS", "SCHEDULER_NAMES", "get_scheduler"]
