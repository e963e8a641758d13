"""`hpclaunch` entry point: the command group and the boundary where library errors become exit codes."""

from __future__ import annotations

import importlib
from typing import Any

import click

from hpclaunch.cli.options import WholeHelpGroup
from hpclaunch.core.version import __version__
from hpclaunch.errors import HpclaunchError

# The modules of hpclaunch/cli/ that define commands (each has `register(group)`). Add yours here.
MODULES = ("submit", "profiles", "recipes", "status", "cancel", "resume", "logs", "report", "stage", "assets",
           "export", "plan", "clean", "watch", "schema", "sync", "mcp", "wait", "avail", "ui", "suspects")
# Command name -> its module, so that running a command imports only that module (a fast
# `submit --dry-run`). A command missing here still works: every module is imported to find it.
COMMAND_MODULES = {"submit": "submit", "profiles": "profiles", "recipes": "recipes", "status": "status",
                   "jobs": "status", "cancel": "cancel", "resume": "resume", "logs": "logs", "report": "report",
                   "compare": "report", "stage-assets": "stage", "assets": "assets",
                   "export": "export", "export-run": "export", "plan": "plan", "clean": "clean", "watch": "watch",
                   "schema": "schema", "sync": "sync", "mcp": "mcp", "wait": "wait",
                   "avail": "avail", "ui": "ui", "suspects": "suspects"}


class Group(WholeHelpGroup):
    """Loads command modules lazily; turns HpclaunchError into one message on stderr and its exit code
    (2 for user errors)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()

    def load(self, module: str) -> None:
        if module not in self._loaded:
            self._loaded.add(module)
            importlib.import_module(f"hpclaunch.cli.{module}").register(self)

    def load_all(self) -> None:
        for module in MODULES:
            self.load(module)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            self.load(COMMAND_MODULES[cmd_name])
        if cmd_name not in self.commands:
            self.load_all()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load_all()
        return super().list_commands(ctx)

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
    """Import every command module now (tests and docs that walk all commands use this)."""
    cli.load_all()


def main() -> None:
    cli.main(prog_name="hpclaunch")


if __name__ == "__main__":
    main()


if __name__ == "__main__":  # python -m hpclaunch.cli.main
    main()
