"""The network topology a job is placed by (docs/profiles.md#network-topology): the profile's `topology:` section
(what the cluster's network is, when it is not read from the scheduler, and how jobs are placed by default) and a
recipe's `topology.placement` (`--set topology.placement=none`), which wins over the profile's.

placement is one of: auto (hpclaunch chooses from the job's parallel groups, submission/placement.py), none (ask
nothing), switches=N or switches=N@TIME (at most N leaf switches, waiting at most TIME for them: topology/tree),
segment=N (every N nodes of the job inside one block: topology/block)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from hpclaunch.config.base import Meta, SlurmTimeText, StrictModel
from hpclaunch.config.rules import slurm_time

_PLACEMENT = re.compile(r"^(?:auto|none|switches=([1-9][0-9]{0,5})(?:@([0-9:-]{1,16}))?|segment=([1-9][0-9]{0,5}))$")

PLACEMENT_FORMS = "auto, none, switches=N, switches=N@TIME or segment=N"


def placement_text(value: str) -> str:
    """A placement as written in a profile or --set, checked: ValueError naming the forms it may take."""
    m = _PLACEMENT.match(value.strip())
    if not m:
        raise ValueError(f"{value!r} is not a placement: give {PLACEMENT_FORMS} (e.g. switches=1@10:00, segment=2)")
    if m.group(2):
        slurm_time(m.group(2))
    return value.strip()


def parse_placement(value: str) -> tuple[str, int | None, str | None]:
    """``switches=1@10:00`` -> ("switches", 1, "10:00"); ``segment=2`` -> ("segment", 2, None); ``none`` ->
    ("none", None, None). The value was checked by `placement_text`."""
    m = _PLACEMENT.match(value.strip())
    if m is None:
        raise ValueError(placement_text(value))
    if m.group(1):
        return "switches", int(m.group(1)), m.group(2)
    if m.group(3):
        return "segment", int(m.group(3)), None
    return value.strip(), None, None


Placement = Annotated[str, Meta(extra={"check": placement_text}, description=(
    "auto: hpclaunch chooses from the job's tensor-parallel groups; none: ask nothing; switches=N[@TIME] (a "
    "tree: at most N leaf switches, waiting at most TIME); segment=N (blocks: every N nodes in one block)"))]


class TopologyConfig(StrictModel, frozen=True, kw_only=True):
    """The cluster's network as far as a job's placement needs it (docs/profiles.md#network-topology)."""

    kind: Annotated[Literal["auto", "tree", "block", "none"], Meta(
        description="auto: read from the scheduler at submit (Slurm: scontrol show topology), only for a job whose "
                    "tensor-parallel groups span nodes; tree: leaf switches (Slurm topology/tree); block: blocks "
                    "(Slurm topology/block, 23.11+); none: no topology, nothing read or asked")] = "auto"
    size: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(
        description="nodes under one leaf switch (tree) or in one block (block): given, it wins over what the "
                    "scheduler reports; kind tree or block needs it")] = None
    placement: Annotated[Placement, Meta(description="how jobs are placed unless a recipe or --set "
                                         "topology.placement says otherwise")] = "auto"
    max_wait: Annotated[SlurmTimeText, Meta(
        extra={"check": slurm_time},
        description="how long Slurm may hold a job for the leaf switch it asks (switches=1@max_wait): past it, "
                    "the job starts on the nodes it can get (Slurm caps it at its max_switch_wait)")] = "10:00"

    def __post_init__(self) -> None:
        if self.kind in ("tree", "block") and self.size is None:
            raise ValueError(f"topology.kind {self.kind} needs topology.size: the nodes under one "
                             + ("leaf switch" if self.kind == "tree" else "block")
                             + " (scontrol show topology lists them)")


class TopologySpec(StrictModel, frozen=True, kw_only=True):
    """A job's placement over the profile's (--set topology.placement=none)."""

    placement: Annotated[Placement | None, Meta(description="the profile's topology.placement unless given")] = None
