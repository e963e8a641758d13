"""`hpclaunch profiles init`: a first profile written from what the Slurm cluster says about itself.

`scontrol show partition --oneliner` gives each partition's limits (MaxTime, MaxNodes, Default, Hidden);
`scontrol show node --oneliner` each node's CPUs, memory, GPUs (Gres) and partitions; `module -t avail`
(when Lmod is installed) the modules the user may want to load. A partition's numbers are those of its
smallest node, so that every node of it fits the profile. The user edits the rest (accelerator, backend,
Python environment, modules to load).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch.config.walltime import format_time, parse_time
from hpclaunch.core import cmd
from hpclaunch.errors import ConfigError

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")
#: Where Lmod's shell set-up usually lives (the profile's modules.init).
LMOD_INIT = ("/etc/profile.d/lmod.sh", "/usr/share/lmod/lmod/init/bash")
MAX_MODULES_LISTED = 60


def parse_oneliner(text: str) -> list[dict[str, str]]:
    """The records of `scontrol show ... --oneliner`: one KEY=VALUE line each (a value may hold spaces)."""
    records = []
    for line in text.splitlines():
        keys = list(_KEY.finditer(line))
        if not keys:
            continue
        rec = {}
        for i, m in enumerate(keys):
            end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
            rec[m.group(1)] = line[m.end():end].strip()
        records.append(rec)
    return records


def parse_gres(gres: str) -> tuple[int, str | None]:
    """(GPUs, GPU type) in a node's Gres: `gpu:4`, `gpu:a100:8(S:0-1)`, `gpu:a100:6,gpu:a100_1g.10gb:14`.
    Several types: their sum, and the types joined with `+`."""
    count, types = 0, []
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2 or not parts[-1].isdigit():
            continue
        count += int(parts[-1])
        if len(parts) >= 3 and parts[1] not in types:
            types.append(parts[1])
    return count, "+".join(types) or None


@dataclass
class PartitionFacts:
    name: str
    default: bool
    max_time: str | None  # None: UNLIMITED
    max_nodes: int
    gpus_per_node: int = 0
    gpu_type: str | None = None
    cpus_per_node: int = 0
    memory_gb: float | None = None
    nodes: list[str] = field(default_factory=list)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def partitions(partition_text: str, node_text: str) -> list[PartitionFacts]:
    """Each visible partition with the smallest of its nodes' GPUs, CPUs and memory."""
    nodes = parse_oneliner(node_text)
    out = []
    for rec in parse_oneliner(partition_text):
        if rec.get("Hidden") == "YES" or "PartitionName" not in rec:
            continue
        name = rec["PartitionName"]
        mine = [n for n in nodes if name in n.get("Partitions", "").split(",")]
        max_time = rec.get("MaxTime", "UNLIMITED")
        facts = PartitionFacts(
            name=name, default=rec.get("Default") == "YES",
            max_time=None if max_time == "UNLIMITED" else format_time(parse_time(max_time)),
            max_nodes=_int(rec.get("MaxNodes")) or _int(rec.get("TotalNodes")) or max(len(mine), 1),
            nodes=[n.get("NodeName", "?") for n in mine])
        if mine:
            gres = [parse_gres(n.get("Gres", "")) for n in mine]
            facts.gpus_per_node = min(g[0] for g in gres)
            facts.gpu_type = next((g[1] for g in gres if g[1]), None)
            facts.cpus_per_node = min(_int(n.get("CPUTot")) or 1 for n in mine)
            memory = [_int(n.get("RealMemory")) for n in mine]
            if all(m for m in memory):
                facts.memory_gb = round(min(m for m in memory if m) / 1024, 1)
        out.append(facts)
    return out


def lmod_init() -> str | None:
    """The shell file that sets up `module` in batch jobs, when Lmod is installed here."""
    return next((p for p in LMOD_INIT if Path(p).is_file()), None)


def available_modules(init: str) -> list[str]:
    """`module -t avail` through Lmod's init file (the names, without the folder headers)."""
    script = f"source {shlex.quote(init)} >/dev/null 2>&1; module -t avail 2>&1"
    proc = cmd.run(["bash", "-c", script], check=False, timeout=60)
    return [line.strip() for line in proc.stdout.splitlines()
            if line.strip() and not line.strip().endswith((":", "/"))]


def profile_data(name: str, found: list[PartitionFacts], init: str | None) -> dict[str, Any]:
    """The profile as data (what the file's YAML holds, before the comments)."""
    gpus = any(p.gpus_per_node for p in found)
    default = next((p.name for p in found if p.default), found[0].name)
    parts: dict[str, Any] = {}
    for p in found:
        entry: dict[str, Any] = {"gpus_per_node": p.gpus_per_node or 1}
        if p.gpu_type:
            entry["gpu_type"] = p.gpu_type
        entry["cpus_per_node"] = max(p.cpus_per_node, 1)
        if p.memory_gb is not None:
            entry["memory_gb"] = p.memory_gb
        if p.max_time is not None:
            entry["max_time"] = p.max_time
        entry["max_nodes"] = p.max_nodes
        entry["gres"] = "gpu" if p.gpus_per_node else None
        parts[p.name] = entry
    data: dict[str, Any] = {
        "description": f"{name}: written by `hpclaunch profiles init` from scontrol; edit accelerator, backend, "
                       "modules and python",
        "scheduler": "slurm",
        "accelerator": "cuda" if gpus else "cpu",
        "backend": "nccl" if gpus else "gloo",
        "default_partition": default,
        "partitions": parts,
    }
    if init is not None:
        data["modules"] = {"init": init, "load": []}
    scratch = scratch_variable()
    if scratch is not None:  # run directories on the site's scratch filesystem, not in $HOME
        data["run_root"] = f"${scratch}/hpclaunch/runs"
    return data


# what sites call their per-user scratch folder (NERSC: PSCRATCH and SCRATCH; most others: SCRATCH)
SCRATCH_VARIABLES = ("SCRATCH", "PSCRATCH", "SCRATCHDIR")


def scratch_variable() -> str | None:
    """The first of SCRATCH_VARIABLES set to an existing folder here (the login node), else None."""
    return next((v for v in SCRATCH_VARIABLES if os.environ.get(v) and os.path.isdir(os.environ[v])), None)


def render(name: str, data: dict[str, Any], found: list[PartitionFacts], modules: list[str]) -> str:
    """The profile file's text: the data as YAML, with comments on what was found and what to edit."""
    import yaml

    head = [f"# Cluster profile {name!r}, written by `hpclaunch profiles init` from `scontrol show partition`",
            "# and `scontrol show node` (docs/profiles.md#writing-a-profile-from-the-cluster). Check it, then edit:",
            "#  - accelerator/backend (cuda/nccl, npu/hccl, musa/mccl, cpu/gloo), python (venv or conda_env),",
            "#    modules.load, account/qos if your site needs them;",
            "#  - run_root: a shared filesystem (not $HOME); written as $SCRATCH/hpclaunch/runs when $SCRATCH is "
            "set,",
            "#    e.g. run_root: ${SCRATCH:-$HOME}/hpclaunch/runs for a fallback where it is not.",
            "# Partitions (numbers of their smallest node):"]
    for p in found:
        gpu = f"{p.gpus_per_node} x {p.gpu_type or 'gpu (no type in Gres)'}" if p.gpus_per_node else "no GPUs"
        limit = p.max_time or "UNLIMITED (profile default 1-00:00:00 used)"
        head.append(f"#   {p.name}: {len(p.nodes)} nodes, {gpu}, {p.cpus_per_node} CPUs, max time {limit}")
        if not p.gpus_per_node:
            head.append(f"#     {p.name} has no GPUs: gpus_per_node is the processes per node there")
    if modules:
        shown = modules[:MAX_MODULES_LISTED]
        more = f" (and {len(modules) - len(shown)} more)" if len(modules) > len(shown) else ""
        head.append(f"# Modules available (module -t avail){more}:")
        head += [f"#   {m}" for m in shown]
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False)


def discover(name: str, only: tuple[str, ...] = ()) -> str:
    """The text of a profile for this cluster, restricted to the partitions `only` when given; it is
    validated as a Profile before it is returned."""
    part_text = cmd.run(["scontrol", "show", "partition", "--oneliner"]).stdout
    node_text = cmd.run(["scontrol", "show", "node", "--oneliner"]).stdout
    found = partitions(part_text, node_text)
    if only:
        unknown = [p for p in only if p not in {f.name for f in found}]
        if unknown:
            raise ConfigError(f"no partition {', '.join(map(repr, unknown))} on this cluster",
                              hint=f"one of: {', '.join(f.name for f in found) or '(none visible)'}")
        found = [f for f in found if f.name in only]
    if not found:
        raise ConfigError("scontrol shows no partition on this cluster", hint="is this a Slurm login node?")
    init = lmod_init()
    modules = available_modules(init) if init is not None else []
    data = profile_data(name, found, init)
    from hpclaunch.config.base import validate
    from hpclaunch.config.profile import Profile

    validate(Profile, {"name": name, **data}, file="(the profile profiles init would write)")
    return render(name, data, found, modules)


def profile_path(name: str, out: Path | None) -> Path:
    """Where `profiles init NAME` writes: `out`, else the user's cluster_profiles folder."""
    from hpclaunch.core.paths import config_home

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ConfigError(f"{name!r} is not a profile name", hint="use letters, digits, '-', '_' and '.'")
    return out.expanduser() if out is not None else config_home() / "cluster_profiles" / f"{name}.yaml"


def write_profile(name: str, only: tuple[str, ...], out: Path | None, *, force: bool = False) -> Path:
    """Discover the cluster and write the profile file (never over an existing one unless `force`)."""
    path = profile_path(name, out)
    if path.exists() and not force:
        raise ConfigError("the profile file exists already", file=str(path),
                          hint="pass --force to overwrite it, or -o to write elsewhere")
    text = discover(name, only)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
