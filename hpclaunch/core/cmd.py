"""The command-runner seam: every external command (a scheduler's, ssh, tar, ...) goes through `run`, so a missing
command or a failure is reported with the command and its stderr; a backend says how to get its commands
(`missing_hint`)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from hpclaunch.errors import CommandError

_INSTALL_HINTS: dict[str, str] = {}  # program -> what to do when it is missing (each backend says its own)


def missing_hint(hints: Mapping[str, str]) -> None:
    """What to do when one of these programs is missing (a backend's commands), for `require`'s error."""
    _INSTALL_HINTS.update(hints)


def which(program: str) -> str | None:
    return shutil.which(program)


def require(program: str) -> str:
    """Return the path of `program` or raise a CommandError saying how to get it."""
    path = shutil.which(program)
    if path is None:
        raise CommandError(f"command not found: {program}", hint=_INSTALL_HINTS.get(program))
    return path


def run(argv: Sequence[str], *, input: str | None = None, timeout: float = 60.0,
        env: Mapping[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `argv` (never through a shell) and return the completed process.

    Raises CommandError when the program is missing, times out, or (with check) exits non-zero;
    the message carries the command line and the program's stderr.
    """
    require(argv[0])
    line = shlex.join(argv)
    try:
        proc = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                              timeout=timeout, env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired as exc:
        raise CommandError(f"`{line}` did not finish within {timeout:g} s") from exc
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        raise CommandError(f"`{line}` failed with exit code {proc.returncode}: {err}")
    return proc
