"""slurmrestd's answers (OpenAPI v0.0.38 and dbv0.0.38, Slurm 22.05) in hpclaunch's terms. Job records are read
by the Slurm scheduler's own JSON parsers (slurmrestd's job is squeue --json's, its slurmdbd job sacct --json's:
hpclaunch/schedulers/slurm/output.py), reasons worded by hpclaunch/schedulers/slurm/reasons.py; here: what a job
used (``usage``), which queued job runs from a run directory, and the partitions `profiles check` compares.
Pure functions over parsed JSON; recorded answers in tests/fixtures/slurmrestd/."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.walltime import parse_time
from hpclaunch.schedulers.base import Check

if TYPE_CHECKING:
    from hpclaunch.config.profile import Profile


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tres(items: Any, kind: str) -> int | None:
    """The count of TRES `kind` (cpu, mem, node, gres/gpu) in a dbv0.0.38 TRES list."""
    for item in items or []:
        if isinstance(item, Mapping) and (item.get("type") if "/" not in kind else
                                          f"{item.get('type')}/{item.get('name')}") == kind:
            return _int(item.get("count"))
    return None


def _cpu_seconds(value: Any) -> float | None:
    if not isinstance(value, Mapping):
        return None
    seconds, micro = _int(value.get("seconds")), _int(value.get("microseconds"))
    return None if seconds is None else seconds + (micro or 0) / 1e6


def usage(answer: Mapping[str, Any], job_id: str) -> dict[str, Any] | None:
    """What `job_id` used, from ``GET /slurmdb/v0.0.38/job/ID``, as the keyword arguments of
    hpclaunch.report.usage.summarize (the same measurements as sacct's: schedulers/slurm/accounting.py); None
    when slurmdbd has no record of it. Of a requeued job's records, the newest."""
    records = [j for j in answer.get("jobs") or [] if isinstance(j, Mapping) and str(j.get("job_id")) == job_id]
    if not records:
        return None
    job = max(records, key=lambda j: _int((j.get("time") or {}).get("submission")) or 0)
    t, tres = job.get("time") or {}, job.get("tres") or {}
    nodes = _int(job.get("allocation_nodes")) or 1
    cpus = _tres(tres.get("allocated"), "cpu") or _int((job.get("required") or {}).get("CPUs")) or 1
    limit_min = _int(t.get("limit"))
    steps = [s for s in job.get("steps") or [] if isinstance(s, Mapping)]
    rss = [b for b in (_tres(((s.get("tres") or {}).get("requested") or {}).get("max"), "mem") for s in steps)
           if b is not None]
    # sacct's TotalCPU of the allocation: its steps' (the job's own "total" stays 0 in 22.05's slurmdbd)
    cpu = [c for c in (_cpu_seconds((s.get("time") or {}).get("total")) for s in steps) if c is not None]
    req_mb = _tres(tres.get("requested"), "mem")
    state = (job.get("state") or {}).get("current")
    return {"state": str(state[0] if isinstance(state, list) and state else state or ""), "source": "slurmdbd",
            "elapsed_s": _int(t.get("elapsed")), "limit_s": limit_min * 60 if limit_min else None,
            "cpu_s": sum(cpu) if cpu else _cpu_seconds(t.get("total")), "cpus": cpus, "nodes": nodes,
            "max_rss_bytes": max(rss) if rss else None,
            "req_mem_per_node_bytes": req_mb * 1024**2 // nodes if req_mb else None,
            # sacct's ConsumedEnergyRaw: the "energy" TRES (joules) where the site gathers it, else None
            "consumed_energy_j": _tres(tres.get("allocated"), "energy")}


def job_in(answer: Mapping[str, Any], run_dir: Path) -> str | None:
    """The id of the job of ``GET /slurm/v0.0.38/jobs`` that runs in `run_dir` (its working directory: a
    slurm-rest submission sets it), the newest when several do; None when none does."""
    found = [j for j in answer.get("jobs") or [] if isinstance(j, Mapping)
             and j.get("current_working_directory") == str(run_dir) and j.get("job_id")]
    if not found:
        return None
    newest = max(found, key=lambda j: _int(j.get("submit_time")) or 0)
    return str(newest.get("array_job_id") or newest["job_id"])


def release(answer: Mapping[str, Any]) -> str:
    """"Slurm 22.05.8, OpenAPI v0.0.38" from an answer's meta."""
    meta = answer.get("meta") or {}
    slurm = (meta.get("Slurm") or {}).get("release") or "Slurm ?"
    plugin = (meta.get("plugin") or {}).get("type") or "?"
    return f"Slurm {slurm}, {plugin}".replace("Slurm Slurm", "Slurm")


def _per_node(total: int | None, nodes: int | None) -> int | None:
    return total // nodes if total is not None and nodes else None


def partition_checks(answer: Mapping[str, Any], profile: Profile) -> list[Check]:
    """Each of the profile's partitions against ``GET /slurm/v0.0.38/partitions``: it exists; its nodes,
    devices, CPUs and time limit are at least what the profile says."""
    found = {str(p.get("name")): p for p in answer.get("partitions") or [] if isinstance(p, Mapping)}
    checks = []
    for name, want in profile.partitions.items():
        label = f"partition {name}"
        part = found.get(name)
        if part is None:
            checks.append(Check(label, False, f"not among slurmrestd's partitions ({', '.join(sorted(found))})",
                                f"rename partitions.{name} to one of them"))
            continue
        nodes = _int(part.get("total_nodes"))
        tres = dict(kv.split("=", 1) for kv in str(part.get("tres") or "").split(",") if "=" in kv)
        gpus = _per_node(int(tres["gres/gpu"]) if tres.get("gres/gpu", "").isdigit() else None, nodes)
        cpus = _per_node(_int(part.get("total_cpus")), nodes)
        limit = _int(part.get("max_time_limit"))
        problems = [text for bad, text in (
            (nodes is not None and nodes < want.max_nodes,
             f"{nodes} nodes, the profile says max_nodes {want.max_nodes}"),
            (want.gres is not None and (gpus or 0) < want.gpus_per_node,
             f"{gpus or 0} GPUs per node, the profile says {want.gpus_per_node}"),
            (cpus is not None and cpus < want.cpus_per_node, f"{cpus} CPUs per node, the profile says "
                                                              f"{want.cpus_per_node}"),
            (limit is not None and limit >= 0 and limit * 60 < parse_time(want.max_time),
             f"a time limit of {limit} min, the profile says {want.max_time}"),
        ) if bad]
        checks.append(Check(label, not problems, "; ".join(problems) or
                            f"{nodes} nodes x {gpus or 0} GPUs, {cpus} CPUs per node, {limit} min",
                            "lower the profile's values to the partition's" if problems else ""))
    return checks
