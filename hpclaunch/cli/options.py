"""Options shared by several commands."""

from __future__ import annotations

import click

profile_option = click.option("--profile", "-p", required=True, metavar="PROFILE",
                              help="cluster profile name (see `hpclaunch profiles list`) or YAML file")
json_option = click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")
