"""JobSpec: the frozen, validated result of resolve. Everything downstream reads only this.

It is saved as ``resolved.yaml`` in the run directory; that file can be submitted again as is
(``hpclaunch submit RUN_DIR/resolved.yaml``) and is what the recipe script reads inside the job.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field

from hpclaunch import __version__
from hpclaunch.config.base import StrictModel, read_yaml, validate
from hpclaunch.config.profile import Partition, Profile, PythonEnv
from hpclaunch.config.recipe import Recipe


class JobSpec(StrictModel):
    hpclaunch_version: str = __version__
    name: str = Field(description="the Slurm job name")
    recipe: Recipe
    recipe_dir: str = Field(description="absolute path of the recipe folder the job runs from")
    preset: str | None = None
    profile: Profile
    partition: str
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, description="processes (ranks) per node, one per device")
    time: str
    grad_accum: int = Field(ge=1)
    global_batch_size: int = Field(ge=1)
    data_parallel: int = Field(ge=1)
    sets: tuple[str, ...] = Field((), description="the --set overrides, for the record")

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def layout(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"

    @property
    def partition_spec(self) -> Partition:
        return self.profile.partitions[self.partition]

    @property
    def python_env(self) -> PythonEnv:
        return self.profile.python_env_for(self.recipe.python_env)

    @property
    def script_path(self) -> Path:
        return Path(self.recipe_dir) / self.recipe.script

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def load_jobspec(path: str | Path) -> JobSpec:
    """Load a resolved.yaml (inside a job, or to resubmit it)."""
    p = Path(path)
    return validate(JobSpec, read_yaml(p), file=str(p))


def is_jobspec_file(ref: str) -> bool:
    p = Path(ref)
    if not p.is_file() or p.suffix not in (".yaml", ".yml") or p.name == "recipe.yaml":
        return False
    try:
        return "hpclaunch_version" in read_yaml(p)
    except Exception:
        return False
