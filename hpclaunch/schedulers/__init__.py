"""Where a rendered job script runs: Slurm, or this machine (local). Looked up by name in the table in
hpclaunch/core/backends.py, which the profile validation uses too; a backend's module is imported only when it is
used.

May import: launchers, config, state, core, errors."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from hpclaunch.core.backends import SCHEDULER_NAMES, SCHEDULERS
from hpclaunch.errors import ConfigError, NotFoundError
from hpclaunch.schedulers.base import JobStatus

if TYPE_CHECKING:
    from hpclaunch.schedulers.base import Scheduler


def get_scheduler(name: str, remote: dict[str, Any] | None = None) -> Scheduler:
    """The scheduler `name`; with `remote` (a login node: core.remote.Target's keys) one that runs its commands
    there over SSH (docs/remote.md)."""
    if name not in SCHEDULERS:
        raise NotFoundError("scheduler", name, SCHEDULERS)
    module, cls = SCHEDULERS[name].path.split(":")
    scheduler: Scheduler = getattr(import_module(module), cls)()
    if remote is not None:
        if "ssh" not in scheduler.capabilities:
            raise ConfigError(f"the {name} scheduler cannot run its commands over SSH (remote:)", key="remote",
                              hint="use a profile with scheduler: slurm for a remote login node")
        from hpclaunch.core.remote import host_for

        scheduler.host = host_for(remote)
    return scheduler


__all__ = ["JobStatus", "SCHEDULERS", "SCHEDULER_NAMES", "get_scheduler"]
