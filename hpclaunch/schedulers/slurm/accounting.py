"""Slurm accounting: what a job used, from `sacct` (elapsed and limit, TotalCPU, MaxRSS of each step,
ReqMem), in the neutral measurements `report` summarizes (hpclaunch/report/usage.py). Standard library only."""

from __future__ import annotations

import re
from typing import Any

from hpclaunch.schedulers.base import clock_seconds

SACCT_FIELDS = "JobID,State,ElapsedRaw,TimelimitRaw,TotalCPU,AllocCPUS,MaxRSS,ReqMem,NNodes,ConsumedEnergyRaw"

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)([nc]?)$")
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def size_bytes(text: str | None, cpus: int = 1, nodes: int = 1, bare: str = "") -> int | None:
    """Slurm's sizes ("12292K", "4000M", "1.5G"; a number without a unit in `bare` units; ReqMem's per-node
    "n" and per-CPU "c" of older Slurm: as the job's total) in bytes; None when empty."""
    m = _SIZE.match((text or "").strip())
    if not m:
        return None
    number, unit, per = m.groups()
    return int(float(number) * _UNITS[unit or bare] * {"n": nodes, "c": cpus}.get(per, 1))


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def from_sacct(text: str, job_id: str) -> dict[str, Any] | None:
    """What `job_id` used, from `sacct --parsable2 --format=SACCT_FIELDS` (its allocation line and its
    steps'), as the keyword arguments of hpclaunch.report.usage.summarize; None when sacct has no line for it."""
    lines = [line.split("|") for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    head = lines[0]
    rows = [dict(zip(head, line, strict=False)) for line in lines[1:]]
    alloc = next((r for r in rows if r.get("JobID") == job_id), None)
    if alloc is None:
        return None
    steps = [r for r in rows if r.get("JobID", "").startswith(job_id + ".")]
    cpus, nodes = _int(alloc.get("AllocCPUS")) or 1, _int(alloc.get("NNodes")) or 1
    limit_min = _int(alloc.get("TimelimitRaw"))
    rss = [b for b in (size_bytes(r.get("MaxRSS")) for r in steps) if b is not None]
    req = size_bytes(alloc.get("ReqMem"), cpus, nodes, bare="M")
    return {"state": alloc.get("State", "").split(" ")[0], "source": "sacct",
            "elapsed_s": _int(alloc.get("ElapsedRaw")), "limit_s": limit_min * 60 if limit_min else None,
            "cpu_s": clock_seconds(alloc.get("TotalCPU")), "cpus": cpus, "nodes": nodes,
            "max_rss_bytes": max(rss) if rss else None,
            "req_mem_per_node_bytes": req // nodes if req else None,
            # joules the nodes used, where the site gathers energy (AcctGatherEnergyType); 0 (or empty) where it
            # does not: "not recorded"; None where sacct was not asked for it
            "consumed_energy_j": (_int(alloc.get("ConsumedEnergyRaw")) or 0) if "ConsumedEnergyRaw" in alloc else None}
