"""How well a job used what it asked for (`report`'s usage section): elapsed vs requested time, CPU efficiency
(TotalCPU / (elapsed x allocated CPUs)) and peak memory (the largest MaxRSS of any step, i.e. of one task: one per
node under torchrun/deepspeed/msrun) against the memory asked per node, from the scheduler's accounting where it
keeps one (Slurm's sacct, like reportseff: `Scheduler.usage`); otherwise elapsed vs limit from the scheduler's
status, and CPU time and peak memory from the job's own samples (hpclaunch/runtime/node/sampler.py,
RUN_DIR/usage/). Device utilisation and memory come from those samples too (nvidia-smi, npu-smi or mthreads-gmi,
whichever the node has; none on a CPU node, which it says). A warning in words for each resource a finished job
used less than half of. Standard library only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.core.backends import SCHEDULERS, can
from hpclaunch.schedulers.base import clock, clock_seconds
from hpclaunch.state.runfiles import read_json_lines

if TYPE_CHECKING:
    from hpclaunch.schedulers.base import JobStatus

LOW = 0.5  # below this share of what was asked: a warning
MIN_ADVICE_S = 120  # a job shorter than this is mostly start-up: its CPU and memory use say nothing about the next
MIN_SAMPLES = 3  # fewer samples of a node than this are too few to advise on CPUs from

def from_status(s: JobStatus) -> dict[str, Any]:
    """Elapsed vs limit only, from the scheduler's status: accounting was off, or the scheduler keeps none (a
    backend that answers a status itself names itself as its source)."""
    out = summarize(state=s.state, source=s.source or "status", elapsed_s=clock_seconds(s.elapsed),
                    limit_s=clock_seconds(s.time_limit))
    if s.source in SCHEDULERS and not can(s.source, "accounting"):
        out["note"] = f"the {s.source} scheduler keeps no CPU or memory accounting; only the time is known"
    else:
        out["note"] = "CPU efficiency and peak memory need Slurm accounting (sacct); only the time is known here"
    return out


def _share(used: float | None, asked: float | None) -> float | None:
    return round(used / asked, 4) if used is not None and asked else None


def summarize(*, state: str, source: str, elapsed_s: float | None, limit_s: float | None,
              cpu_s: float | None = None, cpus: int | None = None, nodes: int | None = None,
              max_rss_bytes: int | None = None, req_mem_per_node_bytes: int | None = None,
              samples: int | None = None, consumed_energy_j: float | None = None) -> dict[str, Any]:
    """The usage record of `report --json` (key `usage`), warnings included; `samples`: the fewest samples of any
    node, where the CPU and memory figures come from the job's own samples; `consumed_energy_j`: accounting's
    energy of the nodes (0: not recorded; report/energy.py reads it)."""
    out: dict[str, Any] = {
        "source": source, "state": state, "elapsed_s": elapsed_s, "time_limit_s": limit_s, "samples": samples,
        "time_used": _share(elapsed_s, limit_s), "cpu_s": cpu_s, "cpus": cpus, "nodes": nodes,
        "cpu_efficiency": _share(cpu_s, elapsed_s * cpus if elapsed_s and cpus else None),
        "max_rss_bytes": max_rss_bytes, "req_mem_per_node_bytes": req_mem_per_node_bytes,
        "memory_used": _share(max_rss_bytes, req_mem_per_node_bytes), "consumed_energy_j": consumed_energy_j}
    out["warnings"] = warnings(out)
    if _no_advice(out):
        out["advice_note"] = _no_advice(out)
    return out


def _no_advice(u: dict[str, Any]) -> str | None:
    """Why the CPU and memory figures give no advice: a job that stopped before its end, or ran too short (or was
    sampled too seldom) for them to say what the next run needs; None when they may advise."""
    if u["state"] != "COMPLETED":
        return None if u["state"] in _UNFINISHED else f"no advice on CPUs or memory: the job ended {u['state']}"
    if u["elapsed_s"] is not None and u["elapsed_s"] < MIN_ADVICE_S:
        return (f"no advice on CPUs or memory: the job ran {_clock(u['elapsed_s'])}, mostly start-up "
                f"(under {_clock(MIN_ADVICE_S)})")
    if u.get("samples") is not None and u["samples"] < MIN_SAMPLES:
        return f"no advice on CPUs or memory: {u['samples']} sample(s) of a node are too few to judge"
    return None


_UNFINISHED = ("RUNNING", "PENDING", "COMPLETING", "SUSPENDED", "SUBMITTING", "UNKNOWN", "")


def warnings(u: dict[str, Any]) -> list[str]:
    """What a job that completed used less than half of, in words, with what to ask for next time (a job that
    stopped early ran short for another reason: no advice from it)."""
    if u["state"] != "COMPLETED":
        return []
    out = []
    if u["time_used"] is not None and u["time_used"] < LOW:
        out.append(f"the job ran {u['time_used']:.0%} of the time it asked for ({_clock(u['elapsed_s'])} of "
                   f"{_clock(u['time_limit_s'])}): a shorter --time starts sooner in a busy queue")
    if _no_advice(u):
        return out
    if u["cpu_efficiency"] is not None and u["cpu_efficiency"] < LOW:
        cpus = "its CPU" if u["cpus"] == 1 else f"its {u['cpus']} CPUs"
        out.append(f"the job kept {cpus} {u['cpu_efficiency']:.0%} busy: ask for fewer CPUs per "
                   "task, or give the data loader more workers")
    if u["memory_used"] is not None and u["memory_used"] < LOW:
        out.append(f"the job's peak memory was {u['memory_used']:.0%} of the memory asked per node: ask for less "
                   "(--sbatch mem=...) and it fits on more nodes")
    return out


def _clock(s: float | None) -> str:
    return clock(s) or "?"


def describe(u: dict[str, Any], size: Any = None) -> str:
    """One line: "elapsed 0:35 of 10:00 (6%), CPU efficiency 11% of 1 CPU, peak memory 596 MiB of 3.9 GiB per
    node (15%)"; `size` turns bytes into words (default: MiB)."""
    size = size or (lambda n: f"{n / 1024**2:.0f} MiB")
    parts = [f"elapsed {_clock(u['elapsed_s'])}" + (f" of {_clock(u['time_limit_s'])} ({u['time_used']:.0%})"
                                                    if u["time_used"] is not None else "")]
    if u["cpu_efficiency"] is not None:
        parts.append(f"CPU efficiency {u['cpu_efficiency']:.0%} of {u['cpus']} CPU{'s' if u['cpus'] != 1 else ''}")
    if u["max_rss_bytes"] is not None:
        asked = u["req_mem_per_node_bytes"]
        parts.append(f"peak memory {size(u['max_rss_bytes'])}"
                     + (f" of {size(asked)} per node ({u['memory_used']:.0%})" if asked else ""))
    return ", ".join(parts)


def read_samples(usage_dir: Path) -> list[list[dict[str, Any]]]:
    """The samples of each node and restart (RUN_DIR/usage/node-<N>.restart-<R>.jsonl), one list per file."""
    out = []
    for path in sorted(usage_dir.glob("node-*.restart-*.jsonl")) if usage_dir.is_dir() else []:
        recs = read_json_lines(path)
        if recs:
            out.append(recs)
    return out


def _nums(recs: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in recs if isinstance(r.get(key), (int, float))]


def _peak(files: list[list[dict[str, Any]]]) -> int | None:
    """The largest memory of any node: its processes' high-water marks (peak_rss_bytes), or, in samples from
    before those, the largest resident memory a sample saw."""
    peaks = [max(_nums(recs, "peak_rss_bytes") or _nums(recs, "rss_bytes"), default=0.0) for recs in files]
    return int(max(peaks)) if peaks and max(peaks) > 0 else None


def with_samples(u: dict[str, Any], files: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """`u` (elapsed vs limit from the status) with the CPU time, CPUs and peak memory of the job's samples."""
    if not files:
        return u
    cpu_s = sum(max(_nums(recs, "cpu_s"), default=0.0) for recs in files)
    cpus_by_node: dict[str, int] = {}
    for recs in files:
        for r in recs:
            if isinstance(r.get("cpus"), int):
                cpus_by_node[str(r.get("node"))] = max(r["cpus"], cpus_by_node.get(str(r.get("node")), 0))
    hwm = any(_nums(recs, "peak_rss_bytes") for recs in files)
    out = summarize(state=u["state"], source="samples", elapsed_s=u["elapsed_s"], limit_s=u["time_limit_s"],
                    cpu_s=round(cpu_s, 2), cpus=sum(cpus_by_node.values()) or None, nodes=len(cpus_by_node) or None,
                    max_rss_bytes=_peak(files), samples=min(len(recs) for recs in files))
    out["note"] = ("CPU time from the job's own samples (every HPCLAUNCH_SAMPLE_INTERVAL s, 30 by default); peak "
                   + ("memory: the high-water mark of the job's processes (VmHWM)" if hwm else
                      "memory from the same samples: a peak between two of them is not seen"))
    return out


def with_peak(u: dict[str, Any], files: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Accounting's usage (`u`, from sacct) with the peak memory of the job's processes where accounting saw less:
    sacct's MaxRSS is sampled (JobAcctGatherFrequency, 30 s by default), so a short job's peak falls between
    its samples."""
    hwm = [recs for recs in files if _nums(recs, "peak_rss_bytes")]
    peak = _peak(hwm) if hwm else None
    if peak is None or (u["max_rss_bytes"] is not None and u["max_rss_bytes"] >= peak):
        return u
    keys = ("state", "source", "elapsed_s", "cpu_s", "cpus", "nodes", "req_mem_per_node_bytes", "samples",
            "consumed_energy_j")
    out = summarize(limit_s=u["time_limit_s"], max_rss_bytes=peak, **{k: u[k] for k in keys})
    out["note"] = (f"peak memory: the high-water mark of the job's processes (VmHWM); {u['source']}'s MaxRSS, "
                   f"sampled, {'had none' if u['max_rss_bytes'] is None else 'was lower'}")
    out["accounting_max_rss_bytes"] = u["max_rss_bytes"]
    return out


def devices(files: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Device utilisation and memory over the samples: mean utilisation, the peak memory of any device against
    its total; on nodes with no device tool, says so. A warning when the devices were less than half busy."""
    samples = [(r, d) for recs in files for r in recs for d in (r.get("devices") or []) if isinstance(d, dict)]
    if not files:
        return {"source": None, "note": "no usage samples in the run directory (a job from before they existed)"}
    if not samples:
        tools = sorted({r["tool"] for recs in files for r in recs if r.get("tool")})
        if tools:  # the tool is there and failed, or printed nothing it could read
            return {"source": None, "note": f"{', '.join(tools)} on the job's nodes gave no device readings (it "
                                             "failed, or printed a table hpclaunch cannot read): no device usage"}
        return {"source": None, "note": "no device tool (nvidia-smi, npu-smi, mthreads-gmi) on the job's nodes: "
                                         "CPU only, no device usage"}
    utils = [d["utilization"] for _, d in samples if isinstance(d.get("utilization"), (int, float))]
    used = [d["memory_used_bytes"] for _, d in samples if isinstance(d.get("memory_used_bytes"), int)]
    total = [d["memory_total_bytes"] for _, d in samples if isinstance(d.get("memory_total_bytes"), int)]
    count = len({(r.get("node"), d.get("index")) for r, d in samples})
    out: dict[str, Any] = {
        "source": next((r.get("tool") for r, _ in samples if r.get("tool")), None), "count": count,
        "samples": len(samples), "mean_utilization": round(sum(utils) / len(utils), 4) if utils else None,
        "peak_memory_bytes": max(used, default=None), "memory_total_bytes": max(total, default=None)}
    out["warnings"] = []
    if out["mean_utilization"] is not None and out["mean_utilization"] < LOW:
        out["warnings"].append(f"the job kept its {count} device(s) {out['mean_utilization']:.0%} busy on average: "
                               "look for input or communication stalls (hpclaunch report's tokens/s)")
    return out


def describe_devices(dev: dict[str, Any], size: Any) -> str:
    if dev.get("source") is None:
        return dev.get("note", "")
    parts = [f"{dev['count']} device(s) ({dev['source']}, {dev['samples']} samples)"]
    if dev["mean_utilization"] is not None:
        parts.append(f"utilisation {dev['mean_utilization']:.0%} on average")
    if dev["peak_memory_bytes"] is not None:
        parts.append(f"peak memory {size(dev['peak_memory_bytes'])}"
                     + (f" of {size(dev['memory_total_bytes'])}" if dev["memory_total_bytes"] else ""))
    return ", ".join(parts)
