"""The `hpclaunch mcp` server: the tools of before.py (profiles, recipes, plan, avail, submit) and jobs.py (jobs,
status, wait, logs, diagnose, report, compare, cancel), served over stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from hpclaunch.core.version import __version__
from hpclaunch.mcp import before, jobs

INSTRUCTIONS = (
    "hpclaunch launches and diagnoses training jobs (DeepSpeed, torchrun, msrun) on Slurm clusters from cluster "
    "profiles and recipes. Start with profiles_list and recipes_list; avail says where devices are free; plan checks "
    "that a recipe fits the devices; submit is a dry run unless confirm is true; then call wait (it blocks until the "
    "job's state changes, with progress) rather than calling status in a loop; when a job failed ask diagnose, fix "
    "the cause and submit again. Every tool answers with the JSON of the matching `hpclaunch ... --json` command.")


def build() -> MCPServer:
    """The server with every tool registered."""
    server = MCPServer("hpclaunch", instructions=INSTRUCTIONS, version=__version__)
    before.register(server)
    jobs.register(server)
    return server


def serve() -> None:
    """Serve on stdin/stdout until the client closes them."""
    build().run("stdio")
