"""hpclaunch status [JOB] and hpclaunch jobs"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict

import click

from hpclaunch import registry
from hpclaunch.cli.options import json_option
from hpclaunch.cli.tables import print_table
from hpclaunch.schedulers import JobStatus, get_scheduler


def statuses(records: list[registry.JobRecord]) -> dict[str, JobStatus]:
    """One scheduler call per scheduler kind for all the records."""
    by_sched: dict[str, list[str]] = defaultdict(list)
    for r in records:
        by_sched[r.scheduler].append(r.job_id)
    out: dict[str, JobStatus] = {}
    for name, ids in by_sched.items():
        out.update(get_scheduler(name).status(ids))
    return out


@click.command("status")
@click.argument("job", required=False)
@json_option
def status_cmd(job: str | None, as_json: bool) -> None:
    """State of JOB (or of every recorded job): state, reason, nodes, elapsed/limit."""
    records = [registry.get(job)] if job else registry.all_records()
    found = statuses(records)
    if as_json:
        click.echo(json.dumps([{**asdict(r), **asdict(found[r.job_id])} for r in records], indent=2))
        return
    for r in records:
        s = found[r.job_id]
        line = f"{r.job_id}  {s.state}"
        if s.reason:
            line += f"  reason: {s.reason}"
        if s.exit_code:
            line += f"  exit: {s.exit_code}"
        if s.nodes:
            line += f"  nodes: {s.nodes}"
        if s.elapsed:
            line += f"  elapsed: {s.elapsed}" + (f"/{s.time_limit}" if s.time_limit else "")
        click.echo(line)
        if job:
            click.echo(f"  recipe {r.recipe} on {r.profile}, {r.layout}, run directory {r.run_dir}")


@click.command("jobs")
@click.option("--limit", "-n", default=20, show_default=True, help="how many recent jobs")
@json_option
def jobs_cmd(limit: int, as_json: bool) -> None:
    """Recent jobs: id, recipe, profile, layout, state."""
    records = registry.all_records()[-limit:]
    found = statuses(records)
    if as_json:
        click.echo(json.dumps([{**asdict(r), "state": found[r.job_id].state} for r in records], indent=2))
        return
    print_table(["job", "recipe", "profile", "layout", "state", "submitted"],
                [(r.job_id, r.recipe + (f":{r.preset}" if r.preset else ""), r.profile, r.layout,
                  found[r.job_id].state, r.submitted_at) for r in records])


def register(group: click.Group) -> None:
    group.add_command(status_cmd)
    group.add_command(jobs_cmd)
