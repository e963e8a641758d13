"""What is free on a Slurm cluster now (`sinfo -N -O`: each node's state, GRES and GRES in use, per partition) and
when a job of a given shape would start (`sbatch --test-only`, which queues nothing)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hpclaunch.core.remote import Host
from hpclaunch.schedulers.base import PartitionLoad
from hpclaunch.schedulers.slurm.checks import gres_count

SINFO_FIELDS = "PartitionName:|,NodeHost:|,StateCompact:|,Gres:|,GresUsed:|"
# node states that take no new job (sinfo's compact forms, with or without a flag suffix such as * or ~)
UNUSABLE = ("down", "drain", "drng", "fail", "maint", "boot", "inval", "futr", "plnd", "resv", "unk", "npc")
_START = re.compile(r"to start at (\S+)")


def parse_load(text: str, gres: str | None) -> list[PartitionLoad]:
    """`sinfo -h -N -O SINFO_FIELDS` -> one PartitionLoad per partition, in sinfo's order. A node that is down,
    drained or reserved counts in `nodes` and `down`, not in what is idle."""
    seen: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 5 or not fields[0]:
            continue
        name, _node, state, total, used = fields[:5]
        row = seen.setdefault(name.rstrip("*"), {"nodes": 0, "idle": 0, "down": 0, "devices": 0, "free": 0})
        have = gres_count(total, gres) if gres else 0
        busy = gres_count(used, gres) if gres else 0
        usable = not state.rstrip("*~#!%$@^-+").startswith(UNUSABLE)
        row["nodes"] += 1
        row["devices"] += have
        if not usable:
            row["down"] += 1
            continue
        row["free"] += max(0, have - busy)
        row["idle"] += state.startswith("idle")
    return [PartitionLoad(n, r["nodes"], r["idle"], r["devices"], r["free"], r["down"]) for n, r in seen.items()]


def load(host: Host, partitions: Sequence[str], gres: str | None) -> list[PartitionLoad]:
    proc = host.run(["sinfo", "-h", "-N", "-p", ",".join(partitions), "-O", SINFO_FIELDS], timeout=60)
    return parse_load(proc.stdout, gres)


def start_estimate(host: Host, partition: str, nodes: int, gres: str | None, per_node: int, time_limit: str | None
              ) -> str | None:
    """When Slurm would start a job of this shape (`sbatch --test-only`: nothing is queued), as it prints it
    (2026-11-29T03:10:00); None when it will not say."""
    argv = ["sbatch", "--test-only", f"--partition={partition}", f"--nodes={nodes}", "--wrap=true"]
    if gres and per_node:
        argv.append(f"--gres={gres}:{per_node}")
    if time_limit:
        argv.append(f"--time={time_limit}")
    proc = host.run(argv, check=False, timeout=60)
    found = _START.search(proc.stderr + proc.stdout)
    return found.group(1) if found else None
