"""slurmrestd's answers in hpclaunch's terms: OpenAPI v0.0.38 (Slurm 22.05: plain numbers) and v0.0.40-v0.0.45 (the
data_parser's: {"set", "infinite", "number"} wrappers, state lists, partitions as nested objects). Job records are read
by the Slurm scheduler's own JSON parsers (slurmrestd's job is squeue --json's, its slurmdbd job sacct --json's, of the
same release: hpclaunch/schedulers/slurm/output.py), reasons worded by hpclaunch/schedulers/slurm/reasons.py; here:
what a job used (``usage``), which queued job runs from a run directory, and the partitions `profiles check` compares.
Pure functions over parsed JSON; recorded answers in tests/fixtures/slurmrestd/ (22.05) and its v0.0.45/ (26.05)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.walltime import parse_time
from hpclaunch.schedulers.base import Check
from hpclaunch.schedulers.slurm.output import json_number

if TYPE_CHECKING:
    from hpclaunch.config.profile import Profile
    from hpclaunch.schedulers.slurm_rest.versions import Api


def _int(value: Any) -> int | None:
    """A whole number, plain or wrapped; None when not set or infinite."""
    n = json_number(value)
    return int(n) if n is not None and n != float("inf") else None


def _tres(items: Any, kind: str) -> int | None:
    """The count of TRES `kind` (cpu, mem, node, gres/gpu) in a TRES list (dbv0.0.38 and v0.0.40 on alike)."""
    for item in items or []:
        if isinstance(item, Mapping) and (item.get("type") if "/" not in kind else
                                          f"{item.get('type')}/{item.get('name')}") == kind:
            return _int(item.get("count"))
    return None


def _names(record: Mapping[str, Any]) -> set[str]:
    """A slurmdbd job record's ids: its own, and ARRAY_TASK for an array task."""
    array = record.get("array")
    array = array if isinstance(array, Mapping) else {}
    parent, task = _int(array.get("job_id")), _int(array.get("task_id"))
    return {str(record.get("job_id")), *([f"{parent}_{task}"] if parent and task is not None else [])}


def _cpu_seconds(value: Any) -> float | None:
    if not isinstance(value, Mapping):
        return None
    seconds, micro = _int(value.get("seconds")), _int(value.get("microseconds"))
    return None if seconds is None else seconds + (micro or 0) / 1e6


def usage(answer: Mapping[str, Any], job_id: str) -> dict[str, Any] | None:
    """What `job_id` used, from ``GET /slurmdb/VERSION/job/ID``, as the keyword arguments of
    hpclaunch.report.usage.summarize (the same measurements as sacct's: schedulers/slurm/accounting.py); None
    when slurmdbd has no record of it. Of a requeued job's records, the newest. An array task (``123_4``) is its
    record of array job 123, task 4 (its own job id is another)."""
    records = [j for j in answer.get("jobs") or [] if isinstance(j, Mapping) and job_id in _names(j)]
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
    # sacct's TotalCPU of the allocation: its steps' (the job's own "total" stays 0 in 22.05's and 26.05's slurmdbd)
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
    """The id of the job of ``GET /slurm/VERSION/jobs`` that runs in `run_dir` (its working directory: a
    slurm-rest submission sets it), the newest when several do; None when none does."""
    found = [j for j in answer.get("jobs") or [] if isinstance(j, Mapping)
             and j.get("current_working_directory") == str(run_dir) and j.get("job_id")]
    if not found:
        return None
    newest = max(found, key=lambda j: _int(j.get("submit_time")) or 0)
    return str(_int(newest.get("array_job_id")) or newest["job_id"])


def release(answer: Mapping[str, Any], api: Api | None = None) -> str:
    """"Slurm 26.05.5, OpenAPI v0.0.45" from an answer's meta (22.05: meta.Slurm and the plugin's type
    openapi/v0.0.38; 24.11 on: meta.slurm and meta.plugin.data_parser), else from `api` (versions.Api)."""
    meta = answer.get("meta") or {}
    slurm = (meta.get("slurm") or meta.get("Slurm") or {}).get("release") or getattr(api, "release", None) or "?"
    plugin = meta.get("plugin") or {}
    said = str(plugin.get("data_parser") or plugin.get("type") or "")
    version = said.rsplit("/", 1)[-1] if "/v" in said else getattr(api, "slurm", None) or "?"
    return f"Slurm {slurm}, OpenAPI {version}"


def _per_node(total: int | None, nodes: int | None) -> int | None:
    return total // nodes if total is not None and nodes else None


def partition_checks(answer: Mapping[str, Any], profile: Profile) -> list[Check]:
    """Each of the profile's partitions against ``GET /slurm/VERSION/partitions``: it exists; its nodes,
    devices, CPUs and time limit are at least what the profile says. v0.0.38 gives total_nodes, total_cpus, tres
    and max_time_limit (minutes); v0.0.40 on nodes.total, cpus.total, tres.configured and maximums.time."""
    found = {str(p.get("name")): p for p in answer.get("partitions") or [] if isinstance(p, Mapping)}
    checks = []
    for name, want in profile.partitions.items():
        label = f"partition {name}"
        part = found.get(name)
        if part is None:
            checks.append(Check(label, False, f"not among slurmrestd's partitions ({', '.join(sorted(found))})",
                                f"rename partitions.{name} to one of them"))
            continue
        nested = isinstance(part.get("nodes"), Mapping)
        nodes = _int(part["nodes"].get("total") if nested else part.get("total_nodes"))
        tres_text = (part.get("tres") or {}).get("configured") if nested else part.get("tres")
        tres = dict(kv.split("=", 1) for kv in str(tres_text or "").split(",") if "=" in kv)
        gpus = _per_node(int(tres["gres/gpu"]) if tres.get("gres/gpu", "").isdigit() else None, nodes)
        cpus = _per_node(_int((part.get("cpus") or {}).get("total") if nested else part.get("total_cpus")), nodes)
        limit = _int((part.get("maximums") or {}).get("time") if nested else part.get("max_time_limit"))
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
