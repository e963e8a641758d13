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

from typing import Annotated, Literal

from hpclaunch.config import rules
from hpclaunch.config.base import Meta, StrictModel

WandbMode = Literal["offline", "online", "disabled"]
#: a W&B project, entity or group name
WandbName = Annotated[str, Meta(extra={"check": rules.wandb_name})]


class WandbSpec(StrictModel, frozen=True, kw_only=True):
    project: Annotated[WandbName | None, Meta(description="W&B project; setting one turns W&B on")] = None
    entity: Annotated[WandbName | None, Meta(description="W&B user or team (default: the API key's)")] = None
    group: Annotated[WandbName | None, Meta(description="W&B run group (default: the sweep, for a sweep's elements)")
                     ] = None
    tags: Annotated[tuple[str, ...], Meta(description="W&B run tags", extra={"check": rules.wandb_tags})] = ()
    mode: Annotated[WandbMode | None, Meta(description="offline (default): written into the run directory, "
                                                       "uploaded by `hpclaunch sync JOB` from a node with network; "
                                                       "online: streamed from the job; disabled: off")] = None


class TrackingSpec(StrictModel, frozen=True, kw_only=True):
    wandb: Annotated[WandbSpec | None, Meta(description="Weights & Biases (offline by default)")] = None
