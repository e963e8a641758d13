"""How `hpclaunch mcp` runs a tool: the CLI's own command, in this process, with `--json`; what it prints to stdout
and stderr caught for that call alone (per thread, so calls may overlap), and its exit code kept.

So a tool answers with exactly the JSON of `hpclaunch ... --json` and fails with exactly the message the CLI
prints, by construction. The MCP transport writes to its own copy of the standard output (mcp's stdio_server
points file descriptor 1 at stderr while it serves), so nothing a command prints can reach the wire."""

from __future__ import annotations

import io
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO


@dataclass(frozen=True)
class Outcome:
    """What one command did: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str


class PerThread:
    """A stand-in for sys.stdout or sys.stderr: a thread that captures writes into its own buffer; every other
    thread (the server's logging) writes to the real stream."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, real: TextIO) -> None:
        self.real = real
        self._local = threading.local()

    def _target(self) -> Any:
        return getattr(self._local, "buffer", None) or self.real

    @contextmanager
    def capture(self, buffer: io.StringIO) -> Iterator[None]:
        self._local.buffer = buffer
        try:
            yield
        finally:
            self._local.buffer = None

    def write(self, text: str) -> int:
        return int(self._target().write(text))

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return False  # never a terminal: no colours, no live tables

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


def install() -> tuple[PerThread, PerThread]:
    """Put the per-thread stand-ins in place of sys.stdout and sys.stderr (once per process)."""
    if not isinstance(sys.stdout, PerThread):
        sys.stdout = PerThread(sys.stdout)
    if not isinstance(sys.stderr, PerThread):
        sys.stderr = PerThread(sys.stderr)
    return sys.stdout, sys.stderr


def run(argv: list[str]) -> Outcome:
    """`hpclaunch ARGV` in this process (install() first): exit code, stdout, stderr. A bug (an exception that
    is no HpclaunchError) is one line on the caught stderr, its traceback in the server's own log."""
    out, err = install()
    stdout, stderr = io.StringIO(), io.StringIO()
    with out.capture(stdout), err.capture(stderr):
        code = _invoke(argv)
    if code not in (0, 1, 2) and not stderr.getvalue().strip():
        stderr.write(f"hpclaunch: exited with code {code}\n")
    return Outcome(code, stdout.getvalue(), stderr.getvalue())


def _invoke(argv: list[str]) -> int:
    from hpclaunch.cli.main import cli

    try:
        cli.main(args=argv, prog_name="hpclaunch", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # a bug, not the user's error: one line for the agent, the traceback for the log
        sys.stderr.write(f"hpclaunch: internal error: {type(exc).__name__}: {exc} (the server's log on stderr "
                         "has the traceback)\n")
        assert isinstance(sys.stderr, PerThread)
        traceback.print_exc(file=sys.stderr.real)
        return 1
    return 0
