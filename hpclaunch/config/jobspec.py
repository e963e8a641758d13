"""JobSpec: the frozen, validated result of resolve. Everything downstream reads only this.

It is saved as ``resolved.yaml`` in the run directory; that file can be submitted again as is
(``hpclaunch submit RUN_DIR/resolved.yaml``) and is what the recipe script reads inside the job.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hpclaunch.config.base import StrictModel, read_yaml, validate
from hpclaunch.config.loader import is_jobspec_file
from hpclaunch.config.profile import Profile
from hpclaunch.config.recipe import Recipe
from hpclaunch.config.rules import JobSpecMethods
from hpclaunch.config.tracking import TrackingSpec
from hpclaunch.core.version import __version__

__all__ = ["JobSpec", "load_jobspec", "is_jobspec_file"]


class Watchdog(StrictModel):
    """The hang watchdog as resolved: the recipe's settings over the profile's."""

    enabled: bool = True
    timeout: float = Field(1800.0, gt=0)
    init_timeout: float = Field(3600.0, gt=0)
    min_timeout: float = Field(60.0, gt=0)
    adaptive: bool = Field(True, description="tighten to a multiple of the observed step time (profile default)")


class Resources(StrictModel):
    """What each node's task asks beside its devices, as resolved: the recipe's resources over the devices' share
    of the node. (A resolved.yaml written before these existed reads with the defaults; resubmitting it resolves
    them again.)"""

    cpus_per_task: int = Field(1, ge=1, description="CPUs per node (one task per node)")
    cpus_per_rank: int = Field(1, ge=1, description="cpus_per_task / ranks per node (floor, at least 1): "
                                                    "OMP_NUM_THREADS")
    mem_mb: int | None = Field(None, ge=0, description="memory per node in MiB (1G = 1024); 0: all of the node's; "
                                                      "null: not asked (the scheduler's default)")
    exclusive: bool = Field(False, description="the nodes to this job alone (whole nodes, partition exclusive)")


class JobSpec(StrictModel, JobSpecMethods):
    """world_size, layout, partition_spec, python_env, script_path and to_yaml() come from JobSpecMethods
    (hpclaunch/config/rules.py), shared with the light record of hpclaunch/config/light.py."""

    hpclaunch_version: str = __version__
    name: str = Field(description="the Slurm job name")
    recipe: Recipe
    recipe_dir: str = Field(description="absolute path of the recipe folder the job runs from")
    preset: str | None = None
    profile: Profile
    profile_ref: str | None = Field(None, description="--profile as the user gave it (a name or a file), repeated in "
                                                      "the commands hpclaunch suggests")
    partition: str
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, description="processes (ranks) per node, one per device")
    time: str
    grad_accum: int = Field(ge=1)
    global_batch_size: int = Field(ge=1)
    data_parallel: int = Field(ge=1)
    sets: tuple[str, ...] = Field((), description="the --set overrides, for the record")
    watchdog: Watchdog = Watchdog()
    resources: Resources = Field(Resources(), description="CPUs and memory per node, as resolved")
    resumable: bool = Field(True, description="the script resumes from its checkpoints: a job stopped by "
                                              "preemption or the time limit may requeue (recipe checkpoint.resumable)")
    tracking: TrackingSpec = Field(TrackingSpec(), description="the trackers as resolved: the recipe's keys over the "
                                   "profile's; wandb is null when W&B is off")
    retries: int = Field(0, ge=0, le=100, description="resubmissions after a node-level failure (submit --retries)")
    inject: str | None = Field(None, description="fault injection KIND:RANK:STEP (HPCLAUNCH_INJECT at submit)")
    sbatch: dict[str, str | None] = Field({}, description="submit --sbatch KEY=VALUE: #SBATCH options over the "
                                                          "profile's sbatch_extra (null: a bare flag)")


def load_jobspec(path: str | Path) -> JobSpec:
    """Load a resolved.yaml (inside a job, or to resubmit it)."""
    p = Path(path)
    return validate(JobSpec, read_yaml(p), file=str(p))
