"""The name tables of the launchers and the schedulers: name -> "module:class". The one place each list
lives: `get_launcher`/`get_scheduler` import a backend's module from here when it is used, and the profile
and recipe validation take the valid names from here. Imports nothing, so the config models can use it
without a cycle."""

from __future__ import annotations

LAUNCHERS: dict[str, str] = {
    "torchrun": "hpclaunch.launchers.torchrun:TorchrunLauncher",
    "deepspeed": "hpclaunch.launchers.deepspeed:DeepSpeedLauncher",
    "msrun": "hpclaunch.launchers.msrun:MsrunLauncher",
}

SCHEDULERS: dict[str, str] = {
    "slurm": "hpclaunch.schedulers.slurm.scheduler:SlurmScheduler",
    "local": "hpclaunch.schedulers.local:LocalScheduler",
    "slurm-rest": "hpclaunch.schedulers.slurm_rest.scheduler:SlurmRestScheduler",
}

LAUNCHER_NAMES: tuple[str, ...] = tuple(LAUNCHERS)
SCHEDULER_NAMES: tuple[str, ...] = tuple(SCHEDULERS)
