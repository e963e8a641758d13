"""Cluster profiles: what a cluster offers and how a job sets itself up there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from hpclaunch.config import rules
from hpclaunch.config.base import SlurmTimeText, StrictModel
from hpclaunch.config.rules import BACKENDS, VISIBLE_DEVICES_VAR, ProfileMethods
from hpclaunch.config.tracking import TrackingSpec
from hpclaunch.core.backends import SCHEDULER_NAMES

if TYPE_CHECKING:
    SchedulerName = str
else:
    SchedulerName = Literal[SCHEDULER_NAMES]  # the names in hpclaunch/core/backends.py

Accelerator = Literal["cuda", "musa", "npu", "cpu"]
Backend = Literal["nccl", "mccl", "hccl", "gloo"]

# BACKENDS (which collective backends make sense on which accelerator) and VISIBLE_DEVICES_VAR live in
# hpclaunch/config/rules.py with the checks below, shared with the light records (config/light.py).
__all__ = ["BACKENDS", "VISIBLE_DEVICES_VAR", "Partition", "Modules", "PythonEnv", "AssetConfig",
           "ContainerConfig", "ProfileDefaults", "Profile"]


class Partition(StrictModel):
    gpus_per_node: int = Field(ge=1, description="devices (or, on CPU, processes) per node")
    gpu_type: str | None = None
    gpu_memory_gb: float | None = None
    peak_tflops: float | None = Field(None, description="dense bf16/fp16 peak per device, for MFU")
    cpus_per_node: int = Field(ge=1, description="a job on part of a node asks its devices' share of these")
    cpu_model: str | None = None
    memory_gb: float | None = Field(None, gt=0, description="memory per node (GiB, as Slurm counts); given, a job "
                                                            "on part of a node asks its devices' share of it")
    max_time: SlurmTimeText = "1-00:00:00"
    max_nodes: int = Field(1, ge=1)
    gres: str | None = Field("gpu", description="generic resource to request per node; null: none")
    exclusive: bool = Field(False, description="a job on whole nodes (every device) has them to itself (Slurm "
                                               "--exclusive); a job on part of a node shares it either way")

    @field_validator("max_time")
    @classmethod
    def _time(cls, v: str) -> str:
        return rules.slurm_time(v)

    @field_validator("gpus_per_node")
    @classmethod
    def _devices(cls, v: int) -> int:
        return rules.devices_per_node(v)


class Modules(StrictModel):
    init: str | None = Field(None, description="shell file sourced so that `module` works in batch jobs")
    purge: bool = False
    use: tuple[str, ...] = ()
    load: tuple[str, ...] = ()


class PythonEnv(StrictModel):
    executable: str = "python"
    conda_init: str | None = None
    conda_env: str | None = None
    venv: str | None = None

    @model_validator(mode="after")
    def _one_env(self) -> PythonEnv:
        rules.one_python_env(self)
        return self


class AssetConfig(StrictModel):
    store: str = "~/.hpclaunch/assets"
    mirror: str | None = Field(None, description="hub endpoint used when staging, e.g. https://hf-mirror.com")
    endpoints: tuple[str, ...] = Field((), description="fallback endpoints tried after the mirror")


class WatchdogDefaults(StrictModel):
    """The hang watchdog on this cluster (docs/troubleshooting.md#failure-handling)."""

    enabled: bool = True
    timeout: float = Field(1800.0, gt=0, le=14 * 86400, description="seconds without progress on any rank "
                           "before the job is ended as hung; tightens after the first steps to 5x the observed "
                           "step time (never below min_timeout) unless the recipe or --set gives watchdog.timeout")
    init_timeout: float = Field(3600.0, gt=0, le=14 * 86400,
                                description="seconds allowed before the first step (imports, rendezvous, model load)")
    min_timeout: float = Field(60.0, gt=0, description="the floor of the tightened timeout")


class ContainerConfig(StrictModel):
    """Where each node's launch runs (docs/containers.md)."""

    runtime: Literal["none", "apptainer", "pyxis"] = Field(
        "none", description="none: on the node itself; apptainer: inside `apptainer exec IMAGE`; pyxis: "
                            "`srun --container-image=IMAGE` (Slurm with the pyxis plugin)")
    image: str | None = Field(None, description="apptainer: an absolute .sif path or a URI (docker://...); pyxis: "
                                                "an enroot image (nvcr.io#nvidia/pytorch:24.01-py3) or .sqsh path")
    mounts: tuple[str, ...] = Field((), description="extra bind mounts SRC[:DST[:ro|rw]]; the run directory and "
                                                    "the asset store are always mounted")
    env: dict[str, str] = Field({}, description="variables set inside the container")

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: object) -> object:
        return rules.env_strings(v)

    @model_validator(mode="after")
    def _valid(self) -> ContainerConfig:
        rules.container_config(self)
        return self


class ProfileDefaults(StrictModel):
    layout: str | None = None
    time: SlurmTimeText | None = None


class Profile(StrictModel, ProfileMethods):
    name: str
    description: str = ""
    scheduler: SchedulerName = "slurm"
    accelerator: Accelerator
    backend: Backend
    partitions: dict[str, Partition]
    default_partition: str
    account: str | None = None
    qos: str | None = None
    modules: Modules = Modules()
    python: PythonEnv = PythonEnv()
    python_envs: dict[str, PythonEnv] = Field(
        {}, description="named extra environments a recipe may ask for (recipe key python_env), e.g. mindspore")
    env: dict[str, str] = {}
    assets: AssetConfig = AssetConfig()
    defaults: ProfileDefaults = ProfileDefaults()
    sbatch_extra: dict[str, str | None] = Field(
        {}, description="extra #SBATCH options: {exclusive: null, constraint: a100}")
    templates: str | None = Field(None, description="folder of template overrides, relative to the profile")
    run_root: str | None = Field(None, description="where run directories go (a shared filesystem)")
    watchdog: WatchdogDefaults = WatchdogDefaults()
    collective_timeout: float = Field(600.0, gt=0, le=86400, description="seconds a collective may wait before "
                                      "the backend aborts it (process group timeout, NCCL/HCCL variables)")
    max_requeues_without_progress: int = Field(3, ge=1, le=1000, description="requeues (preemption, time limit) "
                                               "in a row without a new checkpoint before the job stops requeueing")
    container: ContainerConfig = ContainerConfig()
    tracking: TrackingSpec = Field(TrackingSpec(), description="the site's tracker defaults, e.g. "
                                   "{wandb: {entity: my-team, mode: offline}}; a recipe's keys win")
    suspect_node_hours: float = Field(24.0, gt=0, description="how long a node blamed for a failure is excluded")

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: object) -> object:
        return rules.env_strings(v)

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        rules.consistent_profile(self)
        return self
