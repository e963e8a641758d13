"""Cluster profiles: what a cluster offers and how a job sets itself up there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from hpclaunch.backends import SCHEDULER_NAMES
from hpclaunch.config.base import SlurmTimeText, StrictModel
from hpclaunch.config.slurmtime import parse_time

if TYPE_CHECKING:
    SchedulerName = str
else:
    SchedulerName = Literal[SCHEDULER_NAMES]  # the names in hpclaunch/backends.py

Accelerator = Literal["cuda", "musa", "npu", "cpu"]
Backend = Literal["nccl", "mccl", "hccl", "gloo"]

# Which collective backends make sense on which accelerator.
BACKENDS: dict[str, tuple[str, ...]] = {
    "cuda": ("nccl", "gloo"),
    "musa": ("mccl", "gloo"),
    "npu": ("hccl",),
    "cpu": ("gloo",),
}

# The variable that restricts which devices a process sees, per accelerator.
VISIBLE_DEVICES_VAR: dict[str, str | None] = {
    "cuda": "CUDA_VISIBLE_DEVICES",
    "musa": "MUSA_VISIBLE_DEVICES",
    "npu": "ASCEND_RT_VISIBLE_DEVICES",
    "cpu": None,
}


class Partition(StrictModel):
    gpus_per_node: int = Field(ge=1, description="devices (or, on CPU, processes) per node")
    gpu_type: str | None = None
    gpu_memory_gb: float | None = None
    peak_tflops: float | None = Field(None, description="dense bf16/fp16 peak per device, for MFU")
    cpus_per_node: int = Field(ge=1)
    cpu_model: str | None = None
    memory_gb: float | None = None
    max_time: SlurmTimeText = "1-00:00:00"
    max_nodes: int = Field(1, ge=1)
    gres: str | None = Field("gpu", description="generic resource to request per node; null: none")

    @field_validator("max_time")
    @classmethod
    def _time(cls, v: str) -> str:
        parse_time(v)
        return v


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
        if self.conda_env and self.venv:
            raise ValueError("set either conda_env or venv, not both")
        return self


class AssetConfig(StrictModel):
    store: str = "~/.hpclaunch/assets"
    mirror: str | None = Field(None, description="hub endpoint used when staging, e.g. https://hf-mirror.com")
    endpoints: tuple[str, ...] = Field((), description="fallback endpoints tried after the mirror")


class ProfileDefaults(StrictModel):
    layout: str | None = None
    time: SlurmTimeText | None = None


class Profile(StrictModel):
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

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: object) -> object:
        if isinstance(v, dict):
            return {str(k): str(val) for k, val in v.items()}
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if self.backend not in BACKENDS[self.accelerator]:
            raise ValueError(f"backend {self.backend!r} does not run on accelerator {self.accelerator!r}; "
                             f"use one of: {', '.join(BACKENDS[self.accelerator])}")
        if self.default_partition not in self.partitions:
            raise ValueError(f"default_partition {self.default_partition!r} is not one of the partitions: "
                             f"{', '.join(sorted(self.partitions))}")
        if self.scheduler == "local" and any(p.max_nodes > 1 for p in self.partitions.values()):
            raise ValueError("a local profile runs on one node: set max_nodes: 1")
        return self

    def python_env_for(self, name: str | None) -> PythonEnv:
        if name is None:
            return self.python
        if name not in self.python_envs:
            known = ", ".join(sorted(self.python_envs)) or "none"
            raise ValueError(f"the recipe needs python environment {name!r}, which profile {self.name!r} "
                             f"does not define under python_envs (defined: {known})")
        return self.python_envs[name]

    @property
    def visible_devices_var(self) -> str | None:
        return VISIBLE_DEVICES_VAR[self.accelerator]
