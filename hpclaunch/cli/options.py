"""Options shared by several commands, and how `--json` output is written."""

from __future__ import annotations

import json
from typing import Any

import click

profile_option = click.option("--profile", "-p", required=True, metavar="PROFILE",
                              help="cluster profile name (see `hpclaunch profiles list`) or YAML file")

JSON_HELP = "print JSON for scripts (one object per line)"


class JsonOption(click.Option):
    """`--json`, the same on every command that has it (tests find it by this class)."""


json_option = click.option("--json", "as_json", is_flag=True, cls=JsonOption, help=JSON_HELP)


def echo_json(data: Any) -> None:
    """Print `data` as JSON for scripts: one compact line per object, keys in the order the code wrote them,
    so a stream of them (`logs --json`, `stage-assets --prepare --json`) is JSON Lines."""
    click.echo(json.dumps(data))
