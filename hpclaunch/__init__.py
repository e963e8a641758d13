"""hpclaunch: cluster profiles + recipes -> validated job specs -> rendered sbatch scripts -> Slurm jobs.

The package is layered in one direction (see docs/architecture.md):

    config/      YAML profiles and recipes -> frozen pydantic models
    resolve      the one place where layers merge -> JobSpec
    launchers/   JobSpec -> per-node commands (torchrun, deepspeed, msrun)
    render/      JobSpec + launcher -> job script (Jinja, StrictUndefined)
    schedulers/  job script -> a running job (slurm | local)
    registry     job records under $HPCLAUNCH_HOME
    runtime/     the library that recipe scripts use inside the job
    cli/         the thin click layer; the only place that prints and exits

Nothing here imports torch, transformers, deepspeed or mindspore at import time.
"""

__version__ = "0.1.0"
