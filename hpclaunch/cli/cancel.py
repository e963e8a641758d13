"""hpclaunch cancel JOB"""

from __future__ import annotations

import click

from hpclaunch import registry
from hpclaunch.cli.options import echo_json, json_option
from hpclaunch.errors import HpclaunchError
from hpclaunch.schedulers import get_scheduler


@click.command("cancel")
@click.argument("job")
@json_option
def cancel_cmd(job: str, as_json: bool) -> None:
    """Cancel JOB (every step and the batch script)."""
    record = registry.get(job)
    if record.pending:
        raise HpclaunchError(f"{record.job_id} is still being handed to the scheduler; it has no job id yet",
                             hint="run `hpclaunch jobs` in a moment and cancel the job id it shows")
    get_scheduler(record.scheduler).cancel(record.job_id)
    if as_json:
        echo_json({"job_id": record.job_id, "cancelled": True})
    else:
        click.echo(f"cancelled {record.job_id}")


def register(group: click.Group) -> None:
    group.add_command(cancel_cmd)
