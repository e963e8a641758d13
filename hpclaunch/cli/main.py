"""`hpclaunch` entry point: the command group and the boundary where library errors become exit codes."""

from __future__ import annotations

import sys
from typing import Any

import click

from hpclaunch import __version__
from hpclaunch.errors import HpclaunchError


class Group(click.Group):
    """Turns HpclaunchError into one message on stderr and its exit code (2 for user errors)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HpclaunchError as exc:
            click.echo(f"hpclaunch: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hpclaunch")
def cli() -> None:
    """Generate and submit DeepSpeed, torchrun and msrun training jobs from cluster profiles and recipes."""


def _register() -> None:
    from hpclaunch.cli import assets, cancel, profiles, recipes, stage, status, submit, logs, report

    for module in (submit, profiles, recipes, status, cancel, logs, report, stage, assets):
        module.register(cli)


_register()


def main() -> None:
    cli.main(prog_name="hpclaunch")


if __name__ == "__main__":
    sys.exit(main())
