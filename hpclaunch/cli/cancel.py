"""hpclaunch cancel JOB... (hpclaunch/jobs/cancel.py does the work)"""

from __future__ import annotations

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option


@click.command("cancel", epilog=examples(
    "hpclaunch cancel 12345",
    "hpclaunch cancel 12345 12346 12347_2  # several jobs, one element of a sweep",
    "hpclaunch cancel 12350  # a sweep: all its elements",
    "hpclaunch cancel 12345 --json"))
@click.argument("jobs", nargs=-1, shell_complete=complete.job, required=True, metavar="JOB...")
@json_option
def cancel_cmd(jobs: tuple[str, ...], as_json: bool) -> None:
    """Cancel each JOB (every step and the batch script); a sweep's id cancels the whole sweep.

    A job that has already ended is left alone: cancel says how and when it ended, and exits 0.
    Every id is checked before anything is cancelled.
    """
    from hpclaunch import api

    done = api.cancel(jobs)
    if as_json:
        echo_json(done)
        return
    for c in done.jobs:
        click.echo(c.message)


def register(group: click.Group) -> None:
    group.add_command(cancel_cmd)
