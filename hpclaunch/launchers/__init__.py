"""Launchers turn a JobSpec into the command each node runs. Looked up by name in the table in
hpclaunch/core/backends.py, which the recipe validation uses too; a launcher's module is imported only when it is
used.

May import: config, state, core, errors."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from hpclaunch.core.backends import LAUNCHER_NAMES, LAUNCHERS
from hpclaunch.errors import NotFoundError

if TYPE_CHECKING:
    from hpclaunch.launchers.base import Launcher



def get_launcher(name: str) -> Launcher:
    if name not in LAUNCHERS:
        raise NotFoundError("launcher", name, LAUNCHERS)
    module, cls = LAUNCHERS[name].split(":")
    launcher: Launcher = getattr(import_module(module), cls)()
    return launcher


__all__ = ["LAUNCHERS", "LAUNCHER_NAMES", "get_launcher"]
