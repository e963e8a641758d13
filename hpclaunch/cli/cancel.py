"""hpclaunch cancel JOB"""

from __future__ import annotations

import click

from hpclaunch.cli.options import echo_json, json_option


@click.command("cancel")
@click.argument("job")
@json_option
def cancel_cmd(job: str, as_json: bool) -> None:
    """Cancel JOB (every step and the batch script)."""
    from hpclaunch.api import job as find_job

    found = find_job(job)
    found.cancel()
    if as_json:
        echo_json({"job_id": found.job_id, "cancelled": True})
    else:
        click.echo(f"cancelled {found.job_id}")


def register(group: click.Group) -> None:
    group.add_command(cancel_cmd)
