"""`hpclaunch profiles check` on a Slurm cluster: the commands on PATH, and each partition of the profile as
`sinfo` shows it (present, its GRES and how many devices per node, CPUs and memory per node, time limit).
`probe`: one task on one node, waited for (`sbatch --wait`), for `profiles check --on-node`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.walltime import parse_time
from hpclaunch.core import cmd
from hpclaunch.errors import CommandError
from hpclaunch.schedulers.base import Check

if TYPE_CHECKING:
    from hpclaunch.config.profile import Partition, Profile

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sacct", "sinfo")
MEMORY_SLACK = 0.05  # a node's memory may be this much under the profile's figure
SINFO_FORMAT = "%R|%G|%c|%m|%l|%D"  # partition, GRES, CPUs, memory (MB), time limit, nodes: one line per node group


def commands() -> Check:
    missing = [c for c in COMMANDS if cmd.which(c) is None]
    if not missing:
        return Check("slurm commands", True, "all found: " + " ".join(COMMANDS))
    return Check("slurm commands", False, f"missing: {' '.join(missing)}",
                 "run hpclaunch on a login node of the cluster, or load the Slurm module first")


def parse_sinfo(text: str) -> dict[str, list[dict[str, str]]]:
    """`sinfo -h -o SINFO_FORMAT` -> partition -> its node groups ({gres, cpus, memory_mb, time, nodes})."""
    out: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 6 or not fields[0]:
            continue
        name, gres, cpus, memory, limit, nodes = fields
        out.setdefault(name.rstrip("*"), []).append(
            {"gres": gres, "cpus": cpus, "memory_mb": memory, "time": limit, "nodes": nodes})
    return out


def gres_count(gres: str, name: str) -> int:
    """Devices per node of GRES `name` in sinfo's %G (`gpu:a100:8(S:0-1),shard:4` -> 8; none -> 0)."""
    best = 0
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] == name and parts[-1].isdigit():
            best = max(best, int(parts[-1]))
    return best


def _int(text: str) -> int:
    m = re.match(r"\d+", text)
    return int(m.group()) if m else 0


def _seconds(limit: str) -> int | None:
    try:
        return parse_time(limit)
    except ValueError:  # infinite, n/a
        return None


def partition(name: str, want: Partition, groups: list[dict[str, str]] | None, known: list[str]) -> list[Check]:
    label = f"partition {name}"
    if not groups:
        return [Check(label, False, "not in sinfo" + (f" (the cluster has: {', '.join(known)})" if known else ""),
                      f"rename partitions.{name} to a partition of the cluster, or remove it")]
    nodes = sum(_int(g["nodes"]) for g in groups)
    checks = [Check(label, True, f"found: {nodes} node(s), time limit {groups[0]['time']}")]
    if want.gres:
        have = max(gres_count(g["gres"], want.gres) for g in groups)
        ok = have >= want.gpus_per_node
        checks.append(Check(f"{label} GRES {want.gres}", ok,
                            f"{have} per node (the profile says {want.gpus_per_node})",
                            "" if ok else f"set partitions.{name}.gpus_per_node to {have}, or partitions.{name}.gres "
                                          "to the GRES name sinfo shows (%G), or null for none"))
    cpus = max(_int(g["cpus"]) for g in groups)
    ok = cpus >= want.cpus_per_node
    checks.append(Check(f"{label} CPUs", ok, f"{cpus} per node (the profile says {want.cpus_per_node})",
                        "" if ok else f"set partitions.{name}.cpus_per_node to {cpus} or less"))
    if want.memory_gb:
        memory_mb = max(_int(g["memory_mb"]) for g in groups)
        ok = memory_mb >= want.memory_gb * 1000 * (1 - MEMORY_SLACK)  # sites round: 4000 MB is "4 GB"
        checks.append(Check(f"{label} memory", ok, f"{memory_mb} MB per node (the profile says "
                            f"{want.memory_gb:g} GB)", "" if ok else f"set partitions.{name}.memory_gb to "
                            f"{memory_mb // 1000} or less"))
    limit = groups[0]["time"]
    if _seconds(limit) is not None and _seconds(limit) < parse_time(want.max_time):  # type: ignore[operator]
        checks.append(Check(f"{label} time", False, f"the partition allows {limit}, the profile says "
                            f"{want.max_time}", f"set partitions.{name}.max_time to {limit}"))
    return checks


def profile_checks(profile: Profile) -> list[Check]:
    checks = [commands()]
    if cmd.which("sinfo") is None:
        return checks
    try:
        text = cmd.run(["sinfo", "-h", "-o", SINFO_FORMAT], timeout=60).stdout
    except CommandError as exc:
        return [*checks, Check("sinfo", False, exc.message.splitlines()[0], "check that Slurm answers: `sinfo`")]
    found = parse_sinfo(text)
    for name, want in profile.partitions.items():
        checks += partition(name, want, found.get(name), sorted(found))
        checks += topology(profile, name) if name in found else []
    return checks


def topology(profile: Profile, name: str) -> list[Check]:
    """What Slurm says of the partition's network (docs/profiles.md#network-topology), held against the profile's
    topology section; no row where neither has one."""
    from hpclaunch.schedulers.slurm.topology import read_topology

    cfg, label = profile.topology, f"partition {name} topology"
    if cfg.kind == "none":
        return []
    read = read_topology(cmd.run, name)
    if read is None:
        if cfg.kind == "auto":
            return []
        return [Check(label, True, f"Slurm reports none; the profile says {cfg.kind} of {cfg.size} nodes")]
    unit = "leaf switches" if read.kind == "tree" else "blocks"
    said = f"{unit} of {', '.join(map(str, read.sizes))} nodes (scontrol show topology)"
    if cfg.kind in ("tree", "block") and (cfg.kind != read.kind or (cfg.size or 0) > max(read.sizes)):
        return [Check(label, False, f"{said}; the profile says {cfg.kind} of {cfg.size} nodes",
                      f"set topology.kind to {read.kind} and topology.size to {max(read.sizes)}, or topology.kind to "
                      "auto to use what Slurm says")]
    return [Check(label, True, said)]


def probe(script: Path, output: Path, profile: Profile, *, timeout: float) -> int:
    """`sbatch --wait` of `script` on the default partition: 1 node, 1 task, 1 device where it has a GRES."""
    part = profile.partitions[profile.default_partition]
    asked = {"gres": f"{part.gres}:1" if part.gres else None, "account": profile.account, "qos": profile.qos}
    argv = ["sbatch", "--wait", "--parsable", f"--partition={profile.default_partition}", "--nodes=1",
            "--ntasks=1", "--cpus-per-task=1", "--time=00:10:00", "--job-name=hpclaunch-check",
            f"--output={output}", f"--chdir={output.parent}", *(f"--{k}={v}" for k, v in asked.items() if v)]
    proc = cmd.run([*argv, str(script)], timeout=timeout, check=False)
    if proc.returncode != 0 and not output.exists():
        output.write_text(proc.stderr)
    return proc.returncode
