"""What the tools of `hpclaunch mcp` share: each one is a CLI command run with `--json` (hpclaunch/cli/mcprun.py), its
arguments typed for the agent and turned into that command's words.

A tool answers with the command's JSON (the first text block; a command that prints one object per line, as
`logs` does, answers with their list) and, when the command said more on stderr (notes, warnings), a second text
block with that. A command that fails answers isError with what the CLI prints, never a traceback: nothing is
submitted and nothing is written that the CLI would not (the CLI checks every input before it acts)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from hpclaunch.cli.mcprun import Outcome, run

Job = Annotated[str, Field(description="a job id as submit returned it (a sweep's id, or one element: 12345_2)")]
Sets = Annotated[list[str] | None, Field(description="recipe overrides KEY=VALUE, as --set: [\"train.lr=3e-4\"]")]
Optional = Annotated[str | None, Field(description="as the CLI option of the same name")]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def result(outcome: Outcome, lines: bool = False, note: str | None = None) -> CallToolResult:
    """The tool's answer: the JSON the command printed (its list of objects with `lines`), or isError with what
    it printed on stderr (and the JSON too, when a command printed some before it failed, e.g. compare above its
    tolerance)."""
    said = outcome.stderr.strip()
    if outcome.code != 0:
        text = said or f"hpclaunch: exited with code {outcome.code}"
        extra = [TextContent(type="text", text=outcome.stdout.strip())] if outcome.stdout.strip() else []
        return CallToolResult(content=[TextContent(type="text", text=text), *extra], is_error=True,
                              structured_content={"exit_code": outcome.code, "error": text})
    printed = [line for line in outcome.stdout.splitlines() if line.strip()]
    data: Any = [json.loads(line) for line in printed] if lines else json.loads(printed[0]) if printed else None
    text = "[" + ", ".join(printed) + "]" if lines else printed[0] if printed else "null"  # the CLI's own text
    notes = "\n".join(n for n in (said, note) if n)
    return CallToolResult(content=[TextContent(type="text", text=text),
                                   *([TextContent(type="text", text=notes)] if notes else [])],
                          structured_content=data if isinstance(data, dict) else None)


def options(**values: Any) -> list[str]:
    """--name=value for each value given (`--name` alone for True; each item of a list as its own option), the
    name's underscores as dashes. The `=` form keeps a value that starts with '-' a value."""
    argv: list[str] = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        for v in value if isinstance(value, list) else [value]:
            if v is True:
                argv.append(flag)
            elif v is not None and v is not False:
                argv.append(f"{flag}={v}")
    return argv


def cli(*words: str, positional: list[str] | tuple[str, ...] = (), **values: Any) -> Outcome:
    """`hpclaunch WORDS --json OPTIONS -- POSITIONAL` in this process: after `--`, a job id or recipe that starts
    with '-' is never read as an option."""
    return run([*words, *options(json=True, **values), "--", *positional])

