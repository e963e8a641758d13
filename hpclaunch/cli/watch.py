"""hpclaunch watch [JOB...] (and `jobs --watch`): a live table of running and recent jobs (hpclaunch/jobs/watch.py)."""

from __future__ import annotations

import click

from hpclaunch.cli.options import examples
from hpclaunch.cli.status import interval_option, watch_jobs


@click.command("watch", epilog=examples(
    "hpclaunch watch  # running and recent jobs, every 5 s",
    "hpclaunch watch 12345 12346 --interval 2",
    "hpclaunch watch --once  # one frame, then exit",
    "hpclaunch watch 12345 | tee watch.log  # plain lines, one per job per refresh"))
@click.argument("jobs", nargs=-1)
@interval_option
@click.option("--once", is_flag=True, help="print one frame and exit (for scripts)")
def watch_cmd(jobs: tuple[str, ...], interval: float, once: bool) -> None:
    """A live table of running and recent jobs (or of the JOBs named): state, elapsed/limit, step/max, loss,
    tokens/s, ETA, loss sparkline.

    Refreshed every --interval seconds from one scheduler call; fits 80 columns. Not on a terminal it prints
    one plain line per job per refresh. With JOBs it ends when they have all finished; Ctrl-C quits.
    """
    watch_jobs(jobs, interval, once)


def register(group: click.Group) -> None:
    group.add_command(watch_cmd)
