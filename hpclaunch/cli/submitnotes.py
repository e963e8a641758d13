"""What `submit` (one job or a sweep) says on stderr besides the job id: fault injection armed, how the job
waits (--after), what a dry run asks of each node and its memory plan's line, suspect nodes excluded, the
submission's warnings."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec


def say_inject(spec: JobSpec) -> None:
    if spec.inject:
        click.echo(f"hpclaunch: warning: fault injection armed: HPCLAUNCH_INJECT={spec.inject} (KIND:RANK:STEP)",
                   err=True)


def say_resources(spec: JobSpec) -> None:
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
    click.echo(f"hpclaunch: per node: {spec.gpus_per_node} of {part.gpus_per_node} devices, {res.cpus_per_task} of "
               f"{part.cpus_per_node} CPUs (OMP_NUM_THREADS={threads}), {memory}; "
               + ("the whole node" + (", exclusive" if res.exclusive else "") if whole else "shares the node")
               + ("" if spec.resumable else "; not requeued (checkpoint.resumable is false)"), err=True)


def say_checkpointing(spec: JobSpec) -> None:
    """How the job saves before its time limit (checkpoint.lead_time, checkpoint.requeue), for a dry run."""
    from hpclaunch.core.backends import can

    if not spec.resumable or not can(spec.profile.scheduler, "time_limit"):  # e.g. a local job: no time limit
        return
    c = spec.checkpoint
    first = (f"the plan's {c.plan_bytes / 1e9:.3g} GB at {c.write_gbps:g} GB/s" if c.plan_bytes
             else "no plan: decided on the margin")
    then = "requeues itself" if c.requeue else "chains a follow-on job that resumes (checkpoint.requeue false)"
    click.echo(f"hpclaunch: before the time limit: the ranks save on their own (first write: {first}), USR1 "
               f"{c.lead_time} s before it is the backstop (checkpoint.lead_time), then the job {then}", err=True)


def say_plan(spec: JobSpec) -> None:
    """The memory plan's summary line (docs/plan.md), for a dry run."""
    if spec.micro_batch_auto is not None:
        click.echo(f"hpclaunch: {spec.micro_batch_auto.text}", err=True)
    if spec.recipe.model is None:
        return
    from hpclaunch.errors import NoPlan
    from hpclaunch.plan import plan_job

    try:
        line = plan_job(spec).summary()
    except NoPlan as exc:
        line = f"plan: not made: {exc.message}"
    click.echo(f"hpclaunch: {line}", err=True)


def say_after(spec: JobSpec, after: tuple[str, ...], dry_run: bool) -> str:
    """A dry run says how the job would be queued (hpclaunch/api.py checked --after before anything was
    written). Returns the condition in words ("" without --after)."""
    if not after:
        return ""
    from hpclaunch.schedulers import get_scheduler

    options = get_scheduler(spec.profile.scheduler).dependency_options(after)
    if dry_run and options:
        click.echo(f"# would be queued with: {' '.join(options)}", err=True)
    return ", ".join(after)


def say_after_submit(spec: JobSpec, dry_run: bool, warnings: tuple[str, ...]) -> None:
    from hpclaunch.schedulers import get_scheduler

    if not dry_run and get_scheduler(spec.profile.scheduler).excludes_suspects:
        _say_excluded()
    for warning in warnings:
        click.echo(f"hpclaunch: warning: {warning}", err=True)


def _say_excluded() -> None:
    from hpclaunch.state import suspects

    for node, info in sorted(suspects.load().items()):
        click.echo(f"hpclaunch: excluding suspect node {node} ({info.get('reason')}, job {info.get('job')}) "
                   f"until {time.strftime('%Y-%m-%d %H:%M', time.localtime(float(info['until'])))}", err=True)
