"""Optional dependencies: a command that needs one imports it through `need`, so that a core install
(`pip install hpclaunch` on a login node) gets one clear error naming the extra, not a traceback."""

from __future__ import annotations

import importlib
from types import ModuleType

from hpclaunch.errors import HpclaunchError

# module -> (the extra that installs it, what needs it)
EXTRAS = {
    "matplotlib": ("report", "report and compare draw their plots with matplotlib"),
    "wandb": ("wandb", "sync uploads W&B's offline runs with W&B's own uploader (wandb sync)"),
    "mcp": ("mcp", "hpclaunch mcp serves the Model Context Protocol with the official mcp SDK"),
    "starlette": ("ui", "hpclaunch ui serves its web view with Starlette"),
    "uvicorn": ("ui", "hpclaunch ui serves its web view with uvicorn"),
    "submitit": ("slurm-staging", "stage-assets --slurm-partition runs the staging as a Slurm job through submitit"),
}


def need(module: str) -> ModuleType:
    """Import `module`, or raise HpclaunchError (exit 2) naming the pip extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra, why = EXTRAS[module.split(".")[0]]
        raise HpclaunchError(f"{why}, which is not installed here (no module {module!r})",
                             hint=f"pip install 'hpclaunch[{extra}]'") from None
