"""The `hpclaunch mcp` server: the tools of mcpsubmit (profiles, recipes, plan, submit) and mcpjobs (jobs,
status, logs, diagnose, report, compare, cancel), served over stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from hpclaunch.cli import mcpjobs, mcpsubmit
from hpclaunch.cli.mcprun import install
from hpclaunch.core.version import __version__

INSTRUCTIONS = (
    "hpclaunch launches and diagnoses training jobs (DeepSpeed, torchrun, msrun) on Slurm clusters from cluster "
    "profiles and recipes. Start with profiles_list and recipes_list; plan checks that a recipe fits the devices; "
    "submit is a dry run unless confirm is true; follow a job with status, read it with logs, and when it failed "
    "ask diagnose. Every tool answers with the JSON of the matching `hpclaunch ... --json` command.")


def build() -> MCPServer:
    """The server with every tool registered."""
    server = MCPServer("hpclaunch", instructions=INSTRUCTIONS, version=__version__)
    mcpsubmit.register(server)
    mcpjobs.register(server)
    return server


def serve() -> None:
    """Serve on stdin/stdout until the client closes them. Each call's output is caught per thread (install)
    before the transport takes file descriptors 0 and 1."""
    from hpclaunch.cli.main import cli

    cli.load_all()  # every command registered before calls run side by side (their threads never load one)
    install()
    build().run("stdio")
