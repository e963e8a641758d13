"""hpclaunch cancel JOB"""

from __future__ import annotations

import click

from hpclaunch import registry
from hpclaunch.schedulers import get_scheduler


@click.command("cancel")
@click.argument("job")
def cancel_cmd(job: str) -> None:
    """Cancel JOB (every step and the batch script)."""
    record = registry.get(job)
    get_scheduler(record.scheduler).cancel(record.job_id)
    click.echo(f"cancelled {record.job_id}")


def register(group: click.Group) -> None:
    group.add_command(cancel_cmd)
