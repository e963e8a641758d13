"""`avail`: where a job could run now. For each profile, each partition's devices free and in all, its nodes idle
and down (the scheduler's view: `sinfo` on Slurm), the cost of a device-hour where the profile says it; and, for a
job of a given layout, when the scheduler would start it (Slurm: `sbatch --test-only`, nothing queued)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpclaunch.config.layout import Layout
    from hpclaunch.config.profile import Profile
    from hpclaunch.schedulers.base import PartitionLoad, Scheduler


@dataclass(frozen=True)
class PartitionAvail:
    """One partition of one profile: devices free/all (None: the scheduler cannot tell), nodes idle/all/down,
    the device type and its cost per hour (None: not in the profile)."""

    profile: str
    partition: str
    devices_free: int | None
    devices: int
    nodes_idle: int | None
    nodes: int
    down: int | None
    device_type: str
    cost_per_device_hour: float | None


@dataclass(frozen=True)
class Estimate:
    """When a job of `layout` on a profile's partition would start (`start`: as the scheduler says it; "now" for
    a backend without a queue; None where it cannot tell) and what it would cost an hour."""

    profile: str
    partition: str
    layout: str
    start: str | None
    cost_per_hour: float | None


@dataclass(frozen=True)
class Availability:
    """`avail`: one row per partition of each profile asked, the estimates, and notes (a profile the scheduler
    could not answer for)."""

    partitions: list[PartitionAvail]
    estimates: list[Estimate]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"partitions": [asdict(p) for p in self.partitions],
                "estimates": [asdict(e) for e in self.estimates]}


def avail(profiles: Sequence[str] = (), *, layout: str | None = None, partition: str | None = None,
          time: str | None = None) -> Availability:
    """How busy each partition of each profile is now (default: the user's default profile, else every profile
    found); with `layout` ("2n4g"), when a job of that shape would start on `partition` (default: each profile's
    default partition), asking for `time` (default: the partition's limit)."""
    from hpclaunch.config.layout import parse_layout
    from hpclaunch.config.loader import load_profile
    from hpclaunch.errors import HpclaunchError

    shape = parse_layout(layout) if layout else None
    rows: list[PartitionAvail] = []
    estimates: list[Estimate] = []
    notes: list[str] = []
    for name in _profiles(profiles):
        p = load_profile(name)
        try:
            rows += _partitions(p)
            if shape is not None:
                estimates.append(_estimate(p, partition or p.default_partition, layout or "", shape, time))
        except HpclaunchError as exc:
            notes.append(f"hpclaunch: warning: profile {p.name}: {exc.message.splitlines()[0]}")
    return Availability(rows, estimates, tuple(notes))


def _profiles(given: Sequence[str]) -> list[str]:
    if given:
        return list(given)
    from hpclaunch.config import userconfig
    from hpclaunch.config.loader import profile_files

    default = userconfig.default_profile()
    return [default] if default else sorted(profile_files())


def _scheduler(p: Profile) -> Scheduler:
    """The profile's scheduler, over SSH where the profile has a login node (remote:)."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.submission.overssh import profile_target

    where = profile_target(p)
    return get_scheduler(p.scheduler, None if where is None else where.to_dict())


def _partitions(p: Profile) -> list[PartitionAvail]:
    scheduler, parts = _scheduler(p), p.partitions
    loads: dict[str, PartitionLoad] = {}
    for gres in {spec.gres for spec in parts.values()}:  # one call per GRES name (most profiles: one)
        named = [n for n, spec in parts.items() if spec.gres == gres]
        loads.update({lo.name: lo for lo in scheduler.load(named, gres) or [] if lo.name in named})
    rows = []
    for name, spec in parts.items():
        lo = loads.get(name)
        rows.append(PartitionAvail(p.name, name, lo.devices_free if lo else None,
                                   lo.devices if lo else spec.max_nodes * spec.gpus_per_node,
                                   lo.nodes_idle if lo else None, lo.nodes if lo else spec.max_nodes,
                                   lo.down if lo else None, spec.gpu_type or p.accelerator,
                                   spec.cost_per_device_hour))
    return rows


def _estimate(p: Profile, partition: str, layout: str, shape: Layout, time: str | None) -> Estimate:
    from hpclaunch.errors import ConfigError

    if partition not in p.partitions:
        raise ConfigError(f"no partition {partition!r} in profile {p.name}", key="--partition",
                          hint=f"one of {', '.join(p.partitions)}")
    spec = p.partitions[partition]
    nodes, per_node = shape
    start = _scheduler(p).estimated_start(partition, nodes, spec.gres, per_node, time or spec.max_time)
    cost = spec.cost_per_device_hour * nodes * per_node if spec.cost_per_device_hour is not None else None
    return Estimate(p.name, partition, layout, start, cost)
