"""`hpclaunch submit RECIPE --sweep KEY=V1,V2,... [--max-parallel K]`: printing a sweep's submission and
following it (hpclaunch/submission/sweep.py does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli.options import echo_json
from hpclaunch.errors import JobFailed

if TYPE_CHECKING:
    from hpclaunch.api import Job, JobStatus

INTERRUPTED = 130


def print_sweep(job: Job, *, dry_run: bool, follow: bool, as_json: bool, parsable: bool = False,
                waits: str = "") -> None:
    """What `hpclaunch submit --sweep` prints about a sweep it submitted (api.submit_request did the work and
    said its notes)."""
    done = job.sweep
    assert done is not None
    first = done.elements[0].spec
    ids = [done.element_id(e.index) if done.job_id else None for e in done.elements]
    if parsable:
        click.echo(done.job_id)
    elif as_json:
        echo_json(job)
    elif dry_run:
        click.echo(done.script, nl=False)
        click.echo(f"# dry run: nothing submitted; sweep folder {done.sweep_dir} with {len(done.elements)} "
                   f"elements (element 0's script: {job.element_script(0)})", err=True)
    else:
        at_a_time = f", {done.max_parallel} at a time" if done.max_parallel else ""
        click.echo(f"submitted sweep {done.job_id}: {len(done.elements)} elements of {first.recipe.name} on "
                   f"{first.profile.name}, {first.layout}{at_a_time}" + (f", waiting for {waits}" if waits else ""))
        for job_id, e in zip(ids, done.elements, strict=True):
            click.echo(f"  {job_id}  {e.label}  {e.run_dir}")
        click.echo(f"sweep folder: {done.sweep_dir}")
    if follow and done.job_id is not None:
        follow_sweep(done.job_id, [i for i in ids if i], first.profile.scheduler)


def follow_sweep(sweep_id: str, ids: list[str], scheduler_name: str) -> None:
    """Print each element's state as it changes until every element has ended; exit 1 unless all COMPLETED."""
    from hpclaunch.api.following import sweep_changes

    found: dict[str, JobStatus] = {}
    try:
        for job_id, state in sweep_changes(sweep_id, ids, scheduler_name):
            found[job_id] = state
            click.echo(f"{job_id} {_state(state)}")
    except KeyboardInterrupt:
        click.echo(f"\nhpclaunch: stopped following sweep {sweep_id}; it still runs.\n"
                   f"  its state: hpclaunch status {sweep_id}\n"
                   f"  cancel it: hpclaunch cancel {sweep_id}", err=True)
        raise click.exceptions.Exit(INTERRUPTED) from None
    bad = [j for j in ids if found[j].state != "COMPLETED"]
    click.echo(f"sweep {sweep_id}: {len(ids) - len(bad)} of {len(ids)} elements COMPLETED", err=True)
    if bad:
        raise JobFailed(f"sweep {sweep_id}: {', '.join(f'{j} {found[j].state}' for j in bad)}",
                        hint=f"hpclaunch logs {bad[0]} --diagnose")


def _state(s: JobStatus) -> str:
    return s.state + (f" (exit {s.exit_code})" if s.exit_code and s.finished and s.state != "COMPLETED" else "")
