"""Where on the network a job asks to run, chosen at submit from its parallel groups
(docs/profiles.md#network-topology).

A tensor-parallel group (parallel.model_parallel: consecutive ranks, the innermost dimension of the mesh; a Mixtral's
experts are split by the same plan, so its expert groups are these groups) exchanges activations at every layer:
where it spans nodes, those nodes belong under one leaf switch (Slurm topology/tree) or in one block
(topology/block). Data parallelism (one all-reduce of the gradients per step, overlapped with the backward pass)
and pipeline stages (point to point) may cross switches.

- Groups within a node (model_parallel divides the devices per node): the network carries only data parallelism;
  nothing is asked (Slurm's tree plugin already packs a job under the fewest switches it can, and a hard request
  would only add queue time). The topology is not even read.
- Groups across nodes, on a tree: the whole job under one leaf switch when it fits one (switches=1@max_wait, a
  bounded wait), else the fewest leaf switches that hold it (a tree cannot keep each group under one switch
  across switches: said so). On blocks: segment = the nodes of one group, every group inside one block.
- A group larger than a leaf switch or block cannot be placed: refused before queueing, with the sizes.

The topology is the profile's (topology.kind and size) where it gives one, else the scheduler's answer (Slurm:
scontrol show topology), read only for a job whose groups span nodes. topology.placement (profile, recipe or --set)
overrides the choice: none asks nothing, switches=N[@TIME] and segment=N are asked as given."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from hpclaunch.config.topology import parse_placement
from hpclaunch.errors import CommandError, ConfigError, LimitError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec, Placement
    from hpclaunch.schedulers.base import Topology

Reader = Callable[[], "Topology | None"]


def tensor_group(spec: JobSpec) -> int:
    """Devices per tensor-parallel group (parallel.model_parallel; 1 without a parallel section)."""
    par = spec.recipe.parallel
    return par.model_parallel if par is not None else 1


def group_nodes(group: int, per_node: int) -> int:
    """The fewest consecutive nodes that hold whole groups of `group` consecutive ranks, `per_node` ranks a node:
    1 where groups sit within a node (8 per node, groups of 4), 2 for groups of 8 on 4 per node, 3 for groups of
    3 on 4 per node (they straddle node boundaries)."""
    return math.lcm(group, per_node) // per_node


def _origin(spec: JobSpec) -> str:
    if spec.recipe.topology.placement is not None:
        return "topology.placement of the recipe or --set"
    return f"profile {spec.profile.name} topology.placement"


def choose(spec: JobSpec, read: Reader | None = None) -> Placement | None:
    """The job's placement: what to ask of the scheduler and why; None where there is nothing to say (a profile
    without a topology and a job whose groups fit within a node, as every job before topologies). `read`: asks
    the scheduler for its topology (only called when the choice needs it)."""
    from hpclaunch.config.jobspec import Placement

    cfg = spec.profile.topology
    given = spec.recipe.topology.placement or cfg.placement
    nodes = spec.nodes + spec.spare_nodes
    tp, per_node = tensor_group(spec), spec.gpus_per_node
    k = group_nodes(tp, per_node)
    groups = f"tensor-parallel groups of {tp} device{'s' if tp > 1 else ''}"
    if given != "auto":
        return _given(spec, given, nodes)
    if cfg.kind == "none" or nodes == 1:
        return None
    if k == 1:
        if cfg.kind == "auto":
            return None
        return Placement(text=f"topology: {groups} sit within a node ({per_node} per node): only data parallelism "
                              "crosses the network, nothing asked (Slurm packs the job under few switches itself)")
    topo, where = _topology(spec, read)
    if topo is None:
        return Placement(text=f"topology: {groups} span {k} nodes, but {where}: nothing asked (give the profile's "
                              "topology.kind and topology.size to place them)")
    kind, size = topo
    unit, units = ("leaf switch", "leaf switches") if kind == "tree" else ("block", "blocks")
    if k > size:
        raise LimitError(
            f"{groups} on {per_node} per node span {k} nodes, but one {unit} holds at most {size} "
            f"node{'s' if size > 1 else ''} ({where}): every group would cross the network between {units} at "
            "every layer",
            hint=f"use groups of at most {size * per_node} device{'s' if size * per_node > 1 else ''} "
                 "(parallel.model_parallel), more devices per node, "
                 "or --set topology.placement=none to run across them anyway")
    if kind == "block":
        return Placement(segment=k, text=f"topology: {groups} span {k} nodes: every {k} nodes in one block of "
                                         f"{size} (segment={k}, {where}); data parallelism across blocks")
    if nodes <= size:
        return Placement(switches=1, max_wait=cfg.max_wait,
                         text=f"topology: {groups} span {k} nodes; the job's {nodes} nodes fit one leaf switch of "
                              f"{size} ({where}): asked for one (switches=1@{cfg.max_wait}, then any nodes)")
    need = math.ceil(nodes / size)
    return Placement(switches=need, max_wait=cfg.max_wait,
                     text=f"topology: {groups} span {k} nodes; the job's {nodes} nodes need {need} leaf switches of "
                          f"{size} ({where}): asked for no more (switches={need}@{cfg.max_wait}); a tree cannot keep "
                          "each group under one switch across switches (blocks can: segment)")


def _given(spec: JobSpec, given: str, nodes: int) -> Placement:
    """topology.placement as given: none, switches=N[@TIME] or segment=N."""
    from hpclaunch.config.jobspec import Placement

    how, count, wait = parse_placement(given)
    origin = _origin(spec)
    if how == "none":
        return Placement(text=f"topology: nothing asked ({origin}: none)")
    if how == "segment":
        assert count is not None
        if nodes % count:
            raise ConfigError(f"segment={count}: the job's {nodes} nodes are not a multiple of {count}; Slurm "
                              "places whole segments", key="topology.placement",
                              hint=f"give a segment that divides {nodes}, or ask for a multiple of {count} nodes")
        return Placement(segment=count, text=f"topology: every {count} nodes in one block (segment={count}, {origin})")
    return Placement(switches=count, max_wait=wait,
                     text=f"topology: at most {count} leaf switch{'es' if count != 1 else ''} "
                          f"(switches={given.split('=', 1)[1]}, {origin})")


def _topology(spec: JobSpec, read: Reader | None) -> tuple[tuple[str, int] | None, str]:
    """(kind, nodes per leaf switch or block) and where it was learnt; (None, why) where it is not known."""
    cfg = spec.profile.topology
    if cfg.kind in ("tree", "block") and cfg.size is not None:
        return (cfg.kind, cfg.size), f"profile {spec.profile.name} topology"
    if read is None:
        return None, "the cluster's topology could not be read from here"
    try:
        topo = read()
    except CommandError as exc:
        return None, f"the topology could not be read ({exc.message})"
    if topo is None:
        return None, "the cluster reports no network topology"
    size = cfg.size or max(topo.sizes)
    where = topo.source + ("" if cfg.size is None else f", size from profile {spec.profile.name}")
    return (topo.kind, size), where


def with_placement(spec: JobSpec, read: Reader | None = None) -> JobSpec:
    """`spec` with its placement (`choose`); the same spec where there is nothing to say."""
    from hpclaunch.config.base import replace

    placement = choose(spec, read)
    return spec if placement is None and spec.placement is None else replace(spec, placement=placement)


def once(read: Reader) -> Reader:
    """`read`, asked at most once (a sweep's elements share the cluster)."""
    answers: list[Topology | None] = []

    def first() -> Topology | None:
        if not answers:
            answers.append(read())
        return answers[0]

    return first


def scheduler_reader(spec: JobSpec) -> Reader:
    """The profile's scheduler, asked for its topology when the choice needs it."""
    def read() -> Topology | None:
        from hpclaunch.schedulers import get_scheduler

        return get_scheduler(spec.profile.scheduler).topology(spec.partition)

    return read
