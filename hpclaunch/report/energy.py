"""Energy and cost of a job (`report`'s energy rows, `compare`'s tokens per kWh; docs/report.md).

    device-hours  devices of the layout x elapsed hours
    energy        the devices' power draw from the job's own samples (hpclaunch/runtime/node/sampler.py: nvidia-smi
                  power.draw, npu-smi Power(W)): each device's mean draw x the elapsed time, summed; and Slurm's
                  ConsumedEnergy (the nodes' energy, where the site gathers it: AcctGatherEnergyType), apart
    cost          device-hours x the partition's cost_per_device_hour (from the job's resolved.yaml)

A figure that is not known is None with a note saying why (no power samples on a CPU-only node; sacct's 0 is
"not recorded", never 0 kWh).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

J_PER_KWH = 3.6e6


def job_facts(run_dir: Path) -> dict[str, Any]:
    """What the run's resolved.yaml says of its size and price: devices, tokens per step and the partition's
    cost_per_device_hour (each None where the file, e.g. of an older run, does not say)."""
    from hpclaunch.report.compare import resolved

    spec = resolved(run_dir)
    devices = spec.get("nodes", 0) * spec.get("gpus_per_node", 0) if spec else 0
    seq = ((spec.get("recipe") or {}).get("train") or {}).get("seq_len")
    part = ((spec.get("profile") or {}).get("partitions") or {}).get(spec.get("partition")) or {}
    tokens = spec.get("global_batch_size", 0) * seq if isinstance(seq, int) else 0
    return {"devices": devices or None, "tokens_per_step": tokens or None,
            "cost_per_device_hour": part.get("cost_per_device_hour")}


def _power_by_device(files: list[list[dict[str, Any]]]) -> dict[tuple[str, int], list[float]]:
    """The power readings (W) of each device (node, index) over every sample file."""
    out: dict[tuple[str, int], list[float]] = {}
    for recs in files:
        for r in recs:
            for d in r.get("devices") or []:
                if isinstance(d, dict) and isinstance(d.get("power_w"), (int, float)):
                    out.setdefault((str(r.get("node")), int(d.get("index", -1))), []).append(float(d["power_w"]))
    return out


def _no_power(files: list[list[dict[str, Any]]]) -> str:
    tools = sorted({str(r["tool"]) for recs in files for r in recs if r.get("tool")})
    if not files:
        return "no usage samples in the run directory: no power"
    if not tools:
        return "no power samples: no device tool (CPU only)"
    return f"no power samples: {', '.join(tools)} gave no power reading"


def of_job(files: list[list[dict[str, Any]]], *, elapsed_s: float | None, devices: int | None,
           cost_per_device_hour: float | None, consumed_energy_j: float | None) -> dict[str, Any]:
    """The energy record of `report --json` (key `energy`)."""
    hours = elapsed_s / 3600 if elapsed_s is not None else None
    device_hours = round(devices * hours, 6) if devices and hours is not None else None
    power = _power_by_device(files)
    notes = []
    energy = None
    if power and elapsed_s is not None:
        energy = round(sum(sum(w) / len(w) for w in power.values()) * elapsed_s / J_PER_KWH, 6)
    elif not power:
        notes.append(_no_power(files))
    sacct = round(consumed_energy_j / J_PER_KWH, 6) if consumed_energy_j else None
    if consumed_energy_j is not None and not consumed_energy_j:
        notes.append("Slurm's ConsumedEnergy is 0 here: not recorded")
    cost = round(device_hours * cost_per_device_hour, 4) if device_hours is not None and \
        cost_per_device_hour is not None else None
    if cost_per_device_hour is None:
        notes.append("no cost: the partition gives no cost_per_device_hour")
    readings = [w for ws in power.values() for w in ws]
    return {"devices": devices, "elapsed_s": elapsed_s, "device_hours": device_hours,
            "energy_kwh": energy if energy is not None else sacct,
            "energy_source": "samples" if energy is not None else "sacct" if sacct is not None else None,
            "devices_sampled": len(power) or None, "power_samples": len(readings) or None,
            "mean_power_w": round(sum(readings) / len(readings), 2) if readings else None,
            "sacct_energy_kwh": sacct, "cost_per_device_hour": cost_per_device_hour, "cost": cost, "notes": notes}


def total(records: list[dict[str, Any]]) -> dict[str, Any]:
    """A sweep's totals over its elements' energy records: a figure is summed where every element has it."""
    def summed(key: str) -> float | None:
        values = [r.get(key) for r in records]
        return round(sum(v for v in values if v is not None), 6) if values and None not in values else None

    return {"device_hours": summed("device_hours"), "energy_kwh": summed("energy_kwh"), "cost": summed("cost"),
            "elements": len(records)}


def cells(e: dict[str, Any]) -> tuple[str, str, str]:
    """(device-hours, energy, cost) as a table shows them; "-" where not known."""
    hours = f"{e['device_hours']:.3g}" if e.get("device_hours") is not None else "-"
    energy = f"{e['energy_kwh']:.3g} kWh" if e.get("energy_kwh") is not None else "not known"
    cost = "-" if e.get("cost") is None else f"{e['cost']:.2f}" if e["cost"] >= 1 else f"{e['cost']:.3g}"
    return hours, energy, cost


def describe(e: dict[str, Any]) -> list[str]:
    """The energy rows of `report`'s summary: one line per figure, each under 80 columns."""
    hours, energy, cost = cells(e)
    lines = [f"device-hours: {hours}" + (f" ({e['devices']} devices x {e['elapsed_s'] / 3600:.3g} h)"
                                         if e.get("device_hours") is not None else "")]
    if e.get("energy_source") == "samples":
        lines.append(f"energy: {energy} ({e['power_samples']} power samples of {e['devices_sampled']} "
                     f"devices, {e['mean_power_w']:g} W mean)")
    elif e.get("energy_source") == "sacct":
        lines.append(f"energy: {energy} (Slurm ConsumedEnergy, the nodes')")
    else:
        lines.append("energy: not known")
    if e.get("energy_source") == "samples" and e.get("sacct_energy_kwh") is not None:
        lines.append(f"energy of the nodes (Slurm ConsumedEnergy): {e['sacct_energy_kwh']:.3g} kWh")
    if e.get("cost") is not None:
        lines.append(f"cost: {cost} ({e['cost_per_device_hour']:g} per device-hour)")
    return lines + [f"note: {n}" for n in e.get("notes", [])]


def steps_run(info: dict[str, Any]) -> int | None:
    """The steps a run trained (its metrics' summary: first to last step)."""
    first, last = info.get("first_step"), info.get("last_step")
    return last - first + 1 if isinstance(first, int) and isinstance(last, int) else None


def tokens_per_kwh(tokens: float | None, e: dict[str, Any]) -> float | None:
    """Tokens trained per kWh; None where the energy or the tokens are not known."""
    kwh = e.get("energy_kwh")
    return round(tokens / kwh, 1) if tokens and kwh else None
