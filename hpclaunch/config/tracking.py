"""The `tracking:` section, in recipes and profiles: which experiment trackers a job writes to besides its
metrics JSON lines and TensorBoard events (hpclaunch/runtime/train/tracking.py, docs/recipes.md#trackers).

    tracking:
      wandb:
        project: gpt2-pretrain     # setting a project turns W&B on
        entity: my-team            # user or team (default: the API key's)
        group: ablation-3          # default: the sweep, for the elements of a sweep
        tags: [a800, zero2]
        mode: offline              # offline (default), online, or disabled

A profile's section gives the site's defaults (an entity, offline because compute nodes have no network); a
recipe's keys (and --set tracking.wandb.KEY=...) win key by key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from hpclaunch.config import rules
from hpclaunch.config.base import StrictModel

WandbMode = Literal["offline", "online", "disabled"]


class WandbSpec(StrictModel):
    project: str | None = Field(None, description="W&B project; setting one turns W&B on")
    entity: str | None = Field(None, description="W&B user or team (default: the API key's)")
    group: str | None = Field(None, description="W&B run group (default: the sweep, for a sweep's elements)")
    tags: tuple[str, ...] = Field((), description="W&B run tags")
    mode: WandbMode | None = Field(None, description="offline (default): written into the run directory, "
                                                     "uploaded by `hpclaunch sync JOB` from a node with network; "
                                                     "online: streamed from the job; disabled: off")

    @field_validator("project", "entity", "group")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return rules.wandb_name(v)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return rules.wandb_tags(v)


class TrackingSpec(StrictModel):
    wandb: WandbSpec | None = Field(None, description="Weights & Biases (offline by default)")
