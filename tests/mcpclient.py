"""A client of `hpclaunch mcp` for the tests: the official SDK's own (mcp.client.stdio + ClientSession) over a
real stdio pipe to the server process, started as docs/agents.md tells an agent host to start it.

    with mcp_client() as client:          # the server inherits os.environ (HPCLAUNCH_HOME of hpc_home, ...)
        client.tool_names()
        data = client.ok("status", job="12345")    # the tool's JSON; fails the test on an error result
        message = client.error("status", job="x")  # the error result's text; fails the test on success
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

AGENTS_DOC = Path(__file__).resolve().parents[1] / "docs" / "agents.md"


def doc_configs() -> list[dict[str, Any]]:
    """Every JSON block of docs/agents.md, parsed."""
    blocks = re.findall(r"```json\n(.*?)```", AGENTS_DOC.read_text(encoding="utf-8"), flags=re.S)
    return [json.loads(block) for block in blocks]


def documented_server() -> tuple[str, list[str]]:
    """The command and args of the project-scoped .mcp.json that docs/agents.md shows (the first JSON block)."""
    entry = doc_configs()[0]["mcpServers"]["hpclaunch"]
    return entry["command"], entry["args"]


@asynccontextmanager
async def _session(env: dict[str, str], cwd: Path | None) -> AsyncIterator[ClientSession]:
    command, args = documented_server()
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@dataclass
class Client:
    portal: BlockingPortal
    session: ClientSession

    def tools(self) -> list[Any]:
        return self.portal.call(self.session.list_tools).tools

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools()]

    def call(self, name: str, **arguments: Any) -> CallToolResult:
        return self.portal.call(self.session.call_tool, name, arguments)

    def call_with_progress(self, name: str, **arguments: Any) -> tuple[CallToolResult, list[tuple[float, str]]]:
        """The call, and the progress notifications the server sent while it ran: (progress, message) each."""
        seen: list[tuple[float, str]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, message or ""))

        res = self.portal.call(functools.partial(self.session.call_tool, name, arguments, progress_callback=progress))
        return res, seen

    def ok(self, name: str, **arguments: Any) -> Any:
        res = self.call(name, **arguments)
        texts = [c.text for c in res.content]
        assert not res.is_error, (name, arguments, texts)
        assert "Traceback" not in "".join(texts)
        return json.loads(texts[0])

    def error(self, name: str, **arguments: Any) -> str:
        res = self.call(name, **arguments)
        texts = [c.text for c in res.content]
        assert res.is_error, (name, arguments, texts)
        assert "Traceback" not in "".join(texts)
        return texts[0]


@contextmanager
def mcp_client(cwd: Path | None = None) -> Iterator[Client]:
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(_session(dict(os.environ), cwd)) as s:
        yield Client(portal, s)
