"""The goodput a job is promised at submit (hpclaunch/plan/promise.py does the arithmetic), from what earlier runs
measured where there are some, else from the profile and the memory plan.

Earlier runs: the newest RUNS jobs in the registry of the same recipe, preset, profile and layout whose run
directories are here. From them:

- a checkpoint's cost: the median seconds a save blocked training (checkpoints.jsonl); else the memory plan's
  checkpoint size over the profile's storage.write_gbps (a synchronous write);
- a recovery: the median seconds from a fault to the next step (recoveries.jsonl, `seconds_to_first_step`); else
  the profile's restarts.recovery_time;
- a step: rank 0's wall seconds per step over its last window (its progress record) of the newest such run.

The failure rate is the profile's restarts.failures_per_node_hour.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.walltime import parse_time
from hpclaunch.plan.promise import Figure, Inputs, Promise, make
from hpclaunch.state.runfiles import RunFiles, read_json_lines

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.state.registry import JobRecord

RUNS = 5  # the newest earlier runs read


def promise_of(spec: JobSpec) -> Promise | None:
    """The job's promise; None where a checkpoint's cost is unknown (no earlier save, no memory plan)."""
    runs = earlier_runs(spec)
    write = _median(runs, _blocked, "save") or _planned_write(spec)
    if write is None:
        return None
    restarts = spec.profile.restarts
    recovery = _median(runs, _recoveries, "recovery") or Figure(
        restarts.recovery_time, "profile restarts.recovery_time (no recovery measured)")
    return make(Inputs(nodes=spec.nodes, limit_s=float(parse_time(spec.time)),
                       rate=Figure(restarts.failures_per_node_hour, "profile restarts.failures_per_node_hour"),
                       write=write, recovery=recovery, step=_step(runs), save_every=spec.recipe.train.save_every,
                       spare_nodes=spec.spare_nodes, max_steps=spec.recipe.train.max_steps))


def write(spec: JobSpec, run_dir: Path) -> None:
    """RUN_DIR/promise.json (nothing where no promise can be made)."""
    made = promise_of(spec)
    if made is not None:
        RunFiles(run_dir).promise.write_text(json.dumps(made.to_json(), indent=1) + "\n", encoding="utf-8")


def read(run_dir: Path) -> Promise | None:
    """The promise written at submit; None for a job submitted without one (or an unreadable file)."""
    try:
        return Promise.from_json(json.loads(RunFiles(run_dir).promise.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def earlier_runs(spec: JobSpec) -> list[tuple[str, RunFiles]]:
    """(job id, run files) of the newest RUNS earlier jobs like this one (recipe, preset, profile, layout)."""
    from hpclaunch.state import registry

    def alike(r: JobRecord) -> bool:
        return (r.recipe, r.preset, r.profile, r.layout) == (spec.recipe.name, spec.preset, spec.profile.name,
                                                            spec.layout) and not (r.sweep or r.remote or r.pending)

    found = sorted((r for r in registry.all_records() if alike(r) and Path(r.run_dir).is_dir()),
                   key=lambda r: r.submitted_at, reverse=True)
    return [(r.job_id, RunFiles(Path(r.run_dir))) for r in found[:RUNS]]


def _blocked(files: RunFiles) -> list[float]:
    return [float(c["blocked_s"]) for c in read_json_lines(files.checkpoint_log)
            if isinstance(c.get("step"), int) and isinstance(c.get("blocked_s"), (int, float))]


def _recoveries(files: RunFiles) -> list[float]:
    from hpclaunch.state import recoveries

    return [float(r["seconds_to_first_step"]) for r in recoveries.load(files)
            if isinstance(r.get("seconds_to_first_step"), (int, float))]


def _median(runs: Sequence[tuple[str, RunFiles]], values: Callable[[RunFiles], list[float]],
            what: str) -> Figure | None:
    """The median of `values` over the runs, with the jobs it came from; None when they measured none."""
    found, jobs = [], []
    for job, files in runs:
        mine = values(files)
        if mine:
            found += mine
            jobs.append(job)
    if not found:
        return None
    n, more = len(found), f", +{len(jobs) - 2} more" if len(jobs) > 2 else ""
    return Figure(statistics.median(found), f"measured, median of {n} {what}{'s' if n > 1 else ''} "
                                            f"(job{'s' if len(jobs) > 1 else ''} {', '.join(jobs[:2])}{more})")


def _planned_write(spec: JobSpec) -> Figure | None:
    c = spec.checkpoint
    if not c.plan_bytes:
        return None
    size = f"{c.plan_bytes / 1e9:.3g} GB" if c.plan_bytes >= 1e9 else f"{c.plan_bytes / 1e6:.3g} MB"
    return Figure(c.plan_bytes / 1e9 / c.write_gbps,
                  f"the plan's {size} at {c.write_gbps:g} GB/s (storage.write_gbps)")


def _step(runs: Sequence[tuple[str, RunFiles]]) -> Figure | None:
    """Rank 0's seconds per step over its last window, in the newest run that has one."""
    for job, files in runs:
        for restart in reversed(files.progress_restarts()):
            win = (files.progress_record(0, restart) or {}).get("win")
            if isinstance(win, list) and len(win) == 3 and win[0] and float(win[1]) > 0:
                return Figure(float(win[1]) / int(win[0]), f"measured, rank 0's last {win[0]} steps (job {job})")
    return None
