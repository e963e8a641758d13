"""What `submit` (one job or a sweep) says besides the job id, as lines for stderr (the CLI) or a tool's second
text block (MCP): fault injection armed, how the job waits (--after), what a dry run asks of each node and its
memory plan's line, suspect nodes excluded, the submission's warnings. `submit_notes` gives them in order;
`promise_notes` the goodput the job is promised."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from hpclaunch.config.jobspec import JobSpec


def submit_notes(spec: JobSpec, after: Sequence[str], dry_run: bool, warnings: Sequence[str], *,
                 per_node: bool = True) -> list[str]:
    """Every line `submit` says about a job (a sweep: about its first element, without the dry run's lines per
    node), in the order it says them."""
    lines = _inject(spec) + _after(spec, after, dry_run)
    if dry_run and per_node:
        lines += _resources(spec) + _checkpointing(spec) + _plan(spec) + _placement(spec)
    if not dry_run and _excludes_suspects(spec):
        lines += _excluded(spec.profile.scheduler)
    return lines + [f"hpclaunch: warning: {w}" for w in warnings]


def promise_notes(run_dir: Path, dry_run: bool) -> list[str]:
    """The goodput the job is promised (RUN_DIR/promise.json, hpclaunch/plan/promise.py): its inputs and the best
    checkpoint interval for a dry run, one line for a job queued."""
    from hpclaunch.submission import measured

    made = measured.read(run_dir)
    if made is None:
        return []
    return [f"hpclaunch: {line}" for line in made.lines()] if dry_run else [f"hpclaunch: {made.summary()}"]


def _inject(spec: JobSpec) -> list[str]:
    if not spec.inject:
        return []
    return [f"hpclaunch: warning: fault injection armed: HPCLAUNCH_INJECT={spec.inject} (KIND:RANK:STEP)"]


def _resources(spec: JobSpec) -> list[str]:
    """What the job asks of each node (resolve's resources), for a dry run."""
    part, res = spec.partition_spec, spec.resources
    threads = spec.recipe.env.get("OMP_NUM_THREADS", res.cpus_per_rank)
    if res.mem_mb is None:
        memory = "memory: the scheduler's default"
    elif res.mem_mb == 0:
        memory = "all of its memory" + (f" ({part.memory_gb:g}G)" if part.memory_gb else "")
    else:
        from hpclaunch.config.memsize import format_size

        memory = format_size(res.mem_mb) + (f" of {part.memory_gb:g}G" if part.memory_gb else "") + " memory"
    whole = spec.gpus_per_node == part.gpus_per_node
    return [f"hpclaunch: per node: {spec.gpus_per_node} of {part.gpus_per_node} devices, {res.cpus_per_task} of "
            f"{part.cpus_per_node} CPUs (OMP_NUM_THREADS={threads}), {memory}; "
            + ("the whole node" + (", exclusive" if res.exclusive else "") if whole else "shares the node")
            + ("" if spec.resumable else "; not requeued (checkpoint.resumable is false)")]


def _checkpointing(spec: JobSpec) -> list[str]:
    """How the job saves before its time limit (checkpoint.lead_time, checkpoint.requeue), for a dry run."""
    from hpclaunch.core.backends import can

    if not spec.resumable or not can(spec.profile.scheduler, "time_limit"):  # e.g. a local job has no time limit
        return []
    c = spec.checkpoint
    first = (f"the plan's {c.plan_bytes / 1e9:.3g} GB at {c.write_gbps:g} GB/s" if c.plan_bytes
             else "no plan: decided on the margin")
    then = "requeues itself" if c.requeue else "chains a follow-on job that resumes (checkpoint.requeue false)"
    return [f"hpclaunch: before the time limit: the ranks save on their own (first write: {first}), USR1 "
            f"{c.lead_time} s before it is the backstop (checkpoint.lead_time), then the job {then}"]


def _plan(spec: JobSpec) -> list[str]:
    """The memory plan's summary line (docs/plan.md), for a dry run."""
    lines = [f"hpclaunch: {spec.micro_batch_auto.text}"] if spec.micro_batch_auto is not None else []
    if spec.recipe.model is None:
        return lines
    from hpclaunch.errors import NoPlan
    from hpclaunch.plan import plan_job

    try:
        line = plan_job(spec).summary()
    except NoPlan as exc:
        line = f"plan: not made: {exc.message}"
    return [*lines, f"hpclaunch: {line}"]


def _placement(spec: JobSpec) -> list[str]:
    """Where on the network the job asks to run and why (submission/placement.py), for a dry run."""
    return [f"hpclaunch: {spec.placement.text}"] if spec.placement is not None and spec.placement.text else []


def _after(spec: JobSpec, after: Sequence[str], dry_run: bool) -> list[str]:
    """A dry run says how the job would be queued (submit checked `after` before anything was written)."""
    if not after or not dry_run:
        return []
    from hpclaunch.schedulers import get_scheduler

    options = get_scheduler(spec.profile.scheduler).dependency_options(after)
    return [f"# would be queued with: {' '.join(options)}"] if options else []


def _excludes_suspects(spec: JobSpec) -> bool:
    from hpclaunch.core.backends import can

    return can(spec.profile.scheduler, "exclude_nodes")


def _excluded(scheduler: str) -> list[str]:
    from hpclaunch.state import suspects

    found = suspects.load()
    return [f"hpclaunch: excluding suspect node {node} ({found[node].get('reason')}, job {found[node].get('job')}) "
            f"until {time.strftime('%Y-%m-%d %H:%M', time.localtime(float(found[node]['until'])))} "
            "(`hpclaunch suspects --clear NODE` if it is healthy)"
            for node in suspects.excluded(scheduler)]
