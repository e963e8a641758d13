"""The cluster's network as Slurm reports it: `scontrol show topology`, one line per switch (topology/tree) or per
block (topology/block, Slurm 23.11+), each with its nodes as a hostlist expression. Recorded outputs:
tests/fixtures/slurm/topology-*.txt.

    SwitchName=s0 Level=0 LinkSpeed=1 Nodes=node[1-2]
    SwitchName=s2 Level=1 LinkSpeed=1 Nodes=node[1-4] Switches=s[0-1]
    BlockName=b1 BlockIndex=0 Nodes=sid[1-2] BlockSize=2

A leaf switch is a switch of Level 0 (nodes attached directly); a switch above it holds only other switches' nodes.
Without a topology plugin Slurm answers "No topology information available" (on stderr, exit 0).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

from hpclaunch.schedulers.base import Topology
from hpclaunch.schedulers.slurm.options import split_nodes

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's hostlist expression as names: ``node[1-3,7],gpu[01-02]x`` -> node1 node2 node3 node7 gpu01x gpu02x
    (one bracket per name, as switches and nodes are named; zero padding kept)."""
    names: list[str] = []
    for word in split_nodes(text):
        m = re.match(r"^([^\[\]]*)\[([^\]]*)\](.*)$", word)
        if not m:
            names.append(word)
            continue
        prefix, ranges, suffix = m.groups()
        for part in ranges.split(","):
            r = _RANGE.match(part.strip())
            if not r:
                names.append(word)  # not a range Slurm writes: counted as one name
                break
            first, last = r.group(1), r.group(2) or r.group(1)
            width = len(first) if first.startswith("0") else 0
            names += [f"{prefix}{str(i).zfill(width)}{suffix}" for i in range(int(first), int(last) + 1)]
    return names


def _fields(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def partition_fields(text: str) -> tuple[set[str] | None, str | None]:
    """`scontrol show partition NAME --oneliner`: (its nodes, its topology's name: Slurm 25.05+, where a partition
    may name one of topology.yaml's; None before)."""
    f = _fields(text)
    nodes = set(expand_hostlist(f["Nodes"])) if f.get("Nodes") and f["Nodes"] != "ALL" else None
    return nodes, f.get("Topology") or None


def parse_topology(text: str, nodes: set[str] | None = None) -> Topology | None:
    """`scontrol show topology`'s answer as leaf switches or blocks with their node counts (of `nodes` only, a
    partition's, where given); None when it lists neither (no topology plugin, or one that reports nothing)."""
    leaves: list[int] = []
    blocks: list[int] = []
    for line in text.splitlines():
        f = _fields(line)
        names = expand_hostlist(f.get("Nodes", ""))
        count = len(names if nodes is None else [n for n in names if n in nodes])
        if "BlockName" in f and count:
            blocks.append(count)
        elif "SwitchName" in f and count and f.get("Level", "0") == "0":
            leaves.append(count)
    if blocks:
        return Topology("block", tuple(blocks), "scontrol show topology")
    if leaves:
        return Topology("tree", tuple(leaves), "scontrol show topology")
    return None


def read_topology(run: Callable[..., subprocess.CompletedProcess[str]], partition: str) -> Topology | None:
    """Ask Slurm through `run` (a host's run: here or on a login node): `scontrol show partition` for the partition's
    nodes and, from Slurm 25.05, its own topology of topology.yaml; then `scontrol show topology` (of that one). Only
    the leaf switches and blocks that hold the partition's nodes count; None without any."""
    part = run(["scontrol", "show", "partition", partition, "--oneliner"], check=False, timeout=30)
    nodes, name = partition_fields(part.stdout) if part.returncode == 0 else (None, None)
    # a name only where the partition names its topology: before 25.05 the word is a node or switch to filter by
    proc = run(["scontrol", "show", "topology", *([name] if name else [])], check=False, timeout=30)
    return parse_topology(proc.stdout, nodes) if proc.returncode == 0 else None
