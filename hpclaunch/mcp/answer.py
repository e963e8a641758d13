"""A tool's answer: an api result as the JSON of the matching `--json` (hpclaunch/api/encode.py) in the first text
block and as structured content, what the result says besides (warnings, notes) in a second; a failure as an error
result with the message the CLI prints, never a traceback (a bug: one line for the agent, the traceback in the
server's log on stderr)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from hpclaunch.api.encode import dumps, encoded
from hpclaunch.errors import HpclaunchError

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
T = TypeVar("T")
log = logging.getLogger("hpclaunch.mcp")


def answer(result: Any, *, note: str | None = None) -> CallToolResult:
    """The tool's answer for an api result."""
    notes = "\n".join(n for n in (*getattr(result, "notes", ()), note) if n)
    data = encoded(result)
    return CallToolResult(content=[TextContent(type="text", text=dumps(result)),
                                   *([TextContent(type="text", text=notes)] if notes else [])],
                          structured_content=data if isinstance(data, dict) else None)


def failed(exc: BaseException, result: Any = None) -> CallToolResult:
    """An error result: what `hpclaunch` prints for `exc` (with the result's JSON too, when there is one, e.g. a
    comparison above its tolerance)."""
    if isinstance(exc, HpclaunchError):
        text, code = f"hpclaunch: error: {exc}", exc.exit_code
    else:  # a bug, not the user's error
        log.error("internal error", exc_info=exc)
        text, code = (f"hpclaunch: internal error: {type(exc).__name__}: {exc} (the server's log on stderr has the "
                      "traceback)"), 1
    extra = [TextContent(type="text", text=dumps(result))] if result is not None else []
    return CallToolResult(content=[TextContent(type="text", text=text), *extra], is_error=True,
                          structured_content={"exit_code": code, "error": text})


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a worker thread (the api blocks on the scheduler and the filesystem), so that calls
    overlap and the server keeps answering."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def respond(fn: Callable[..., Any], *args: Any, note: str | None = None, **kwargs: Any) -> CallToolResult:
    """`answer(fn(...))`, or `failed` for what it raised."""
    try:
        return answer(await run(fn, *args, **kwargs), note=note)
    except Exception as exc:  # every failure becomes an error result, never a traceback on the wire
        return failed(exc)
