"""hpclaunch: cluster profiles + recipes -> validated job specs -> rendered sbatch scripts -> Slurm jobs.

The package is layered in one direction (see docs/architecture.md):

    config/      YAML profiles and recipes -> frozen msgspec models
    resolve      the one place where layers merge -> JobSpec
    launchers/   JobSpec -> per-node commands (torchrun, deepspeed, msrun)
    render/      JobSpec + launcher -> job script (Jinja, StrictUndefined)
    schedulers/  job script -> a running job (slurm | local)
    registry     job records under $HPCLAUNCH_HOME
    runtime/     the library that recipe scripts use inside the job
    cli/         the thin click layer; the only place that prints and exits

Nothing here imports torch, transformers, deepspeed or mindspore at import time.

The Python API (docs/python-api.md): ``hpclaunch.submit(recipe, profile=..., ...)`` returns a ``Job``;
``hpclaunch.job(ID)`` finds a recorded one. Both are loaded on first use (``import hpclaunch`` stays light).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpclaunch.core.version import __version__

__all__ = ["Job", "JobTimeout", "__version__", "job", "submit"]

if TYPE_CHECKING:
    from hpclaunch.api import Job, JobTimeout, job, submit


def __getattr__(name: str) -> Any:
    if name in ("Job", "JobTimeout", "job", "submit"):
        from hpclaunch import api

        return getattr(api, name)
    raise AttributeError(f"module 'hpclaunch' has no attribute {name!r}")
