"""hpclaunch mcp: the Model Context Protocol server for coding agents (hpclaunch/mcp/), over stdio."""

from __future__ import annotations

import click

from hpclaunch.cli.options import examples


@click.command("mcp", epilog=examples("hpclaunch mcp  # started by an agent host: docs/agents.md"))
def mcp_cmd() -> None:
    """Serve the Model Context Protocol on stdin/stdout, for coding agents (Claude Code, VS Code, Cursor).

    Tools to list and show profiles and recipes, avail, plan, submit (a dry run unless confirmed), jobs, status,
    wait, logs, diagnose, report, compare and cancel, each answering with the JSON of the command's --json.

    Runs until the client closes stdin; logs on stderr. Needs the `mcp` extra (pip install 'hpclaunch[mcp]').
    """
    from hpclaunch.core.extras import need

    need("mcp.server.mcpserver")
    from hpclaunch.mcp.server import serve

    serve()


def register(group: click.Group) -> None:
    group.add_command(mcp_cmd)
