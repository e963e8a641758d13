"""The name tables of the launchers and the schedulers. The one place each list lives: `get_launcher`/`get_scheduler`
import a backend's module from here when it is used, and the profile and recipe validation take the valid names from
here (reading the table when they validate, so one line here registers a backend). Imports nothing, so the config
models can use it without a cycle.

A scheduler's entry also declares what it can do (DESIGN.md rule 13: scheduler differences are capabilities of the
backend, never comparisons of scheduler names): code anywhere asks `can(profile.scheduler, "time_limit")`, and a
`Scheduler` object has the same set as `capabilities`."""

from __future__ import annotations

from dataclasses import dataclass

#: What a scheduler backend may be able to do, and what each word means.
CAPABILITIES: dict[str, str] = {
    "multi_node": "a job may span several nodes (without it a profile's partitions have max_nodes 1 and the "
                  "checks across nodes before training are off by default)",
    "time_limit": "a job ends at its time limit, so a resumable one saves before it (checkpoint.lead_time)",
    "srun": "the job's step starts each node's task through Slurm's srun, so srun's plugins work "
            "(container.runtime: pyxis)",
    "accounting": "it keeps what a finished job used, CPU time and peak memory included (Scheduler.usage)",
    "arrays": "it runs a sweep as one job array (Scheduler.submit_array)",
    "ssh": "its commands can run on a login node over SSH (a profile's remote:, docs/remote.md)",
    "exclude_nodes": "its submissions leave out the nodes blamed for recent failures (state/suspects.py)",
    "estimated_start": "it estimates when a pending job will start (a queued job's status, `hpclaunch avail "
                       "--layout`, what submit says)",
    "site_scratch": "its jobs run on a cluster, whose data belongs on the site's scratch rather than under $HOME: "
                    "the run root and asset store default there, and one under $HOME is warned about",
    "same_environment": "its jobs run on this machine with the submitting process's environment (PATH and all): a "
                        "program found here is found by the job (the launcher's programs are checked before queueing)",
}


@dataclass(frozen=True)
class Backend:
    """A scheduler's entry: where its class is ("module:class") and what it can do (names in CAPABILITIES)."""

    path: str
    capabilities: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = self.capabilities - CAPABILITIES.keys()
        if unknown:
            raise ValueError(f"{self.path}: unknown capabilities {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(CAPABILITIES)})")


LAUNCHERS: dict[str, str] = {
    "torchrun": "hpclaunch.launchers.torchrun:TorchrunLauncher",
    "deepspeed": "hpclaunch.launchers.deepspeed:DeepSpeedLauncher",
    "msrun": "hpclaunch.launchers.msrun:MsrunLauncher",
}

_SLURM = frozenset({"multi_node", "time_limit", "srun", "accounting", "arrays", "ssh", "exclude_nodes", "site_scratch",
                    "estimated_start"})

SCHEDULERS: dict[str, Backend] = {
    "slurm": Backend("hpclaunch.schedulers.slurm.scheduler:SlurmScheduler", _SLURM),
    "local": Backend("hpclaunch.schedulers.local:LocalScheduler", frozenset({"arrays", "same_environment"})),
    "slurm-rest": Backend("hpclaunch.schedulers.slurm_rest.scheduler:SlurmRestScheduler", _SLURM - {"ssh"}),
}

LAUNCHER_NAMES: tuple[str, ...] = tuple(LAUNCHERS)
#: The scheduler names at import; validation reads `SCHEDULERS` itself, which a test may extend.
SCHEDULER_NAMES: tuple[str, ...] = tuple(SCHEDULERS)


def can(scheduler: str, capability: str) -> bool:
    """Whether the scheduler named `scheduler` can do `capability` (a name in CAPABILITIES). An unknown capability
    or scheduler is a programming error (the profile validation admits only the names in SCHEDULERS): ValueError."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r} (known: {', '.join(CAPABILITIES)})")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r} (known: {', '.join(SCHEDULERS)})")
    return capability in SCHEDULERS[scheduler].capabilities
