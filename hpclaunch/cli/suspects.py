"""hpclaunch suspects [--clear NODE]... [--clear-all]: the nodes blamed for recent failures, which submissions
leave out (hpclaunch/state/suspects.py), and forgetting one that is healthy again."""

from __future__ import annotations

import time

import click

from hpclaunch import api
from hpclaunch.cli.options import echo_json, examples, json_option
from hpclaunch.cli.tables import print_table


@click.command("suspects", epilog=examples(
    "hpclaunch suspects  # the nodes submissions leave out now, and why",
    "hpclaunch suspects --clear node3  # it is healthy again",
    "hpclaunch suspects --clear-all --json"))
@click.option("--clear", "clear", multiple=True, metavar="NODE", help="forget this suspect (repeatable)")
@click.option("--clear-all", is_flag=True, help="forget every suspect")
@json_option
def suspects_cmd(clear: tuple[str, ...], clear_all: bool, as_json: bool) -> None:
    """The nodes blamed for recent failures: each is left out of later submissions (Slurm --exclude) until its
    time is up. A fault made by HPCLAUNCH_INJECT (a rehearsal) never makes one."""
    if clear and clear_all:
        raise click.UsageError("--clear NODE or --clear-all, not both")
    if clear or clear_all:
        gone = api.clear_suspects(clear)
        if as_json:
            echo_json({"cleared": gone})
        else:
            click.echo(f"forgot {len(gone)} suspect node(s)" + (f": {', '.join(gone)}" if gone else ""))
        return
    found = api.suspects()
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("no suspect nodes: submissions leave none out", err=True)
        return
    rows = [(s.node, time.strftime("%Y-%m-%d %H:%M", time.localtime(s.until)), s.reason, s.job, s.scheduler or "")
            for s in found]
    print_table(["node", "left out until", "why", "job", "scheduler"], rows, ids=("node",), shrink=("why",))


def register(group: click.Group) -> None:
    group.add_command(suspects_cmd)
