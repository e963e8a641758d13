"""Shell quoting. Every value that reaches the shell goes through `quote`; the only unquoted text is a
`ShellExpr`, whose `$VAR` references are expanded inside double quotes and whose literal part is checked."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

_SAFE_HOME_PATH = re.compile(r"^~/[A-Za-z0-9_./+@-]*$")
_SAFE_EXPR = re.compile(r'^(?:[^"\\`$]|\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^"\\`${}]*)?\}|\$[A-Za-z_][A-Za-z0-9_]*)*$')


class ShellExpr(str):
    """A word expanded by the shell at run time, e.g. ``--node_rank=${SLURM_NODEID}``.

    Only ``$NAME``, ``${NAME}`` and ``${NAME:-default}`` may be expanded; quotes, backslashes and
    backticks are refused. It is rendered inside double quotes, so it stays one word.
    """

    def __new__(cls, text: str) -> ShellExpr:
        if not _SAFE_EXPR.match(text):
            raise ValueError(f"unsafe shell expression: {text!r}")
        return super().__new__(cls, text)


def quote(value: object) -> str:
    if isinstance(value, ShellExpr):
        return f'"{value}"'
    return shlex.quote(str(value))


def join(words: Iterable[object]) -> str:
    return " ".join(quote(w) for w in words)


def oneline(value: object) -> str:
    """Text for a `#` comment: a newline would end the comment and run the rest as a command."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def shell_path(path: str) -> str | ShellExpr:
    """``~/x`` -> ``${HOME}/x`` expanded on the cluster (not on the machine that renders)."""
    if _SAFE_HOME_PATH.match(path):
        return ShellExpr("${HOME}/" + path[2:])
    return path
