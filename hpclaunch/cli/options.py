"""Options shared by several commands, and how `--json` output is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from hpclaunch.cli import complete


class WholeHelpGroup(click.Group):
    """A command group whose --help lists each command with the whole first sentence of its help."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with the whole first sentence of its help (click cuts it at 45 characters, mid-sentence)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=300)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def examples(*lines: str) -> str:
    """The Examples section of a command's --help (its epilog): one command line each, `#` comments aligned."""
    width = max(len(line.split("  #", 1)[0]) for line in lines)
    shown = [f"  {a.ljust(width)}  #{b}" if b else f"  {a}" for a, _, b in (line.partition("  #") for line in lines)]
    return "\b\nExamples:\n" + "\n".join(shown)


profile_option = click.option("--profile", "-p", required=True, metavar="PROFILE", shell_complete=complete.profile,
                              help="cluster profile name (see `hpclaunch profiles list`) or YAML file")

_TARGET_OPTIONS = (
    click.option("--profile", "-p", metavar="PROFILE", shell_complete=complete.profile,
                 help="cluster profile name or YAML file (default: default_profile in "
                      "~/.config/hpclaunch/config.yaml; not needed when RECIPE is a resolved.yaml)"),
    click.option("--preset", shell_complete=complete.preset, help="recipe preset, e.g. tiny or full"),
    click.option("--layout", help="NODESnGPUSg, e.g. 2n8g"),
    click.option("--nodes", "-N", type=int, help="number of nodes"),
    click.option("--gpus-per-node", "-G", type=int, help="devices (ranks) per node"),
    click.option("--partition", help="partition of the profile"),
)


def target_options(f: Any) -> Any:
    """Where and how big a recipe runs, as `submit` and `plan` both resolve it: --profile, --preset, --layout,
    --nodes, --gpus-per-node, --partition (in that order in --help)."""
    for option in reversed(_TARGET_OPTIONS):
        f = option(f)
    return f


exclude_option = click.option(
    "--exclude", "exclude", multiple=True, metavar="NODE[,NODE]",
    help="nodes the job must not run on (Slurm's --exclude; with the nodes blamed for recent failures), e.g. "
         "--exclude node7 or node[3-4]; Slurm only")

JSON_HELP = "print JSON for scripts (one object per line)"


class JsonOption(click.Option):
    """`--json`, the same on every command that has it (tests find it by this class)."""


json_option = click.option("--json", "as_json", is_flag=True, cls=JsonOption, help=JSON_HELP)


def echo_json(data: Any) -> None:
    """Print a result as JSON for scripts, through the one encoder (hpclaunch/api/encode.py): one compact line per
    object, so a stream of them (`logs --json`, `stage-assets --prepare --json`) is JSON Lines; versioned."""
    from hpclaunch.api.encode import dumps

    click.echo(dumps(data))


def say(notes: Sequence[str]) -> None:
    """What a result says besides itself (warnings, notes: each a whole line), on stderr."""
    for note in notes:
        click.echo(note, err=True)
