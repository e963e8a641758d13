"""hpclaunch avail [--profile P]... [--layout 2n4g]: free devices per partition now, and when a job of that
layout would start (hpclaunch/api/avail.py)."""

from __future__ import annotations

import click

from hpclaunch import api
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option, say
from hpclaunch.cli.tables import print_table


@click.command("avail", epilog=examples(
    "hpclaunch avail  # the default profile, else every profile",
    "hpclaunch avail --profile dev-slurm --layout 2n4g  # and when a 2-node job would start",
    "hpclaunch avail --json | jq '.partitions[] | select(.devices_free > 0)'"))
@click.option("--profile", "-p", "profiles", multiple=True, shell_complete=complete.profile,
              help="this profile (repeatable; default: default_profile of your config, else every profile)")
@click.option("--layout", metavar="NnGg", help="also: when a job of this layout would start (nothing is queued)")
@click.option("--partition", default=None, help="with --layout: this partition (default: the profile's default)")
@click.option("--time", "time_", metavar="TIME", help="with --layout: the time limit asked (default: the "
              "partition's max_time)")
@json_option
def avail_cmd(profiles: tuple[str, ...], layout: str | None, partition: str | None, time_: str | None,
              as_json: bool) -> None:
    """Free and total devices per partition of each profile, nodes idle and down, and the cost of a device-hour
    where the profile has one; with --layout, when the scheduler would start such a job."""
    found = api.avail(profiles, layout=layout, partition=partition, time=time_)
    say(found.notes)
    if as_json:
        echo_json(found)
        return
    rows = [(p.profile, p.partition, _of(p.devices_free, p.devices), _of(p.nodes_idle, p.nodes),
             "-" if p.down is None else str(p.down), p.device_type,
             "-" if p.cost_per_device_hour is None else f"{p.cost_per_device_hour:g}") for p in found.partitions]
    print_table(["profile", "partition", "devices free", "nodes idle", "down", "device", "cost/device-h"], rows,
                ids=("profile", "partition"))
    for e in found.estimates:
        cost = "" if e.cost_per_hour is None else f", {e.cost_per_hour:g} an hour"
        start = e.start or "at a time the scheduler does not say"
        click.echo(f"{e.layout} on {e.profile}/{e.partition}: starts {start}{cost}")


def _of(part: int | None, whole: int) -> str:
    return f"? of {whole}" if part is None else f"{part} of {whole}"


def register(group: click.Group) -> None:
    group.add_command(avail_cmd)
