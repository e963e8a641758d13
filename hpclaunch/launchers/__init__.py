"""Launchers turn a JobSpec into the command each node runs. Looked up by name in one table."""

from __future__ import annotations

from hpclaunch.errors import NotFoundError
from hpclaunch.launchers.base import Launcher
from hpclaunch.launchers.deepspeed import DeepSpeedLauncher
from hpclaunch.launchers.msrun import MsrunLauncher
from hpclaunch.launchers.torchrun import TorchrunLauncher

LAUNCHERS: dict[str, type[Launcher]] = {
    "torchrun": TorchrunLauncher,
    "deepspeed": DeepSpeedLauncher,
    "msrun": MsrunLauncher,
}


def get_launcher(name: str) -> Launcher:
    if name not in LAUNCHERS:
        raise NotFoundError("launcher", name, LAUNCHERS)
    return LAUNCHERS[name]()
