"""Run one rank's script and keep its output: ``python -m hpclaunch.runtime.node.rank_exec SCRIPT ARGS...``.

torchrun starts this module once per rank. It runs SCRIPT in a child Python, appends everything the
child prints (stdout and stderr, including an import error's traceback) to
``$HPCLAUNCH_LOG_DIR/rank-<RANK>.restart-<HPCLAUNCH_RESTART>.log``, and echoes each line prefixed with
``[rank<R>]:`` to its own stdout (the job's output file). Signals are passed on to the child and the
child's exit status is returned, so torchrun sees the rank fail as it would without the wrapper.
Standard library only: it must start fast and work before anything else is importable.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from hpclaunch.runtime.node import envcarry, nodestage
from hpclaunch.state import runfiles, timeline

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m hpclaunch.runtime.node.rank_exec SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    timeline.mark("ranks_started")  # rank 0 only
    rank = int(os.environ.get("RANK", "0"))
    restart = int(os.environ.get(runfiles.ENV_RESTART, "0") or 0)
    log_dir = Path(os.environ.get(runfiles.ENV_LOG_DIR, "."))
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / runfiles.rank_log_name(rank, restart)
    prefix = f"[rank{rank}]: ".encode()
    stale = _too_old() if os.environ.get("LOCAL_RANK", "0") == "0" else []  # one rank per node: same environment
    if stale:  # before the script: a message now, not a TypeError deep in a library later
        text = "".join(f"hpclaunch: error: {line}\n" for line in stale).encode()
        with open(path, "ab") as stale_log:
            stale_log.write(text)
        sys.stdout.buffer.write(b"".join(prefix + line + b"\n" for line in text.splitlines()))
        return 2
    if os.environ.get("LOCAL_RANK", "0") == "0":
        _note_environment(path)
    # running from the node's copy of the python environment (python.stage node-local): no clean-up of old copies
    # by a later job on this node removes it while the rank runs (nodestage.py)
    nodestage.hold(Path(sys.prefix))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-u", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    out = sys.stdout.buffer
    assert child.stdout is not None
    with open(path, "ab", buffering=0) as log:
        for line in iter(child.stdout.readline, b""):
            log.write(line)
            out.write(line if line.startswith(prefix) else prefix + line)  # torch prefixes a rank's traceback itself
            out.flush()
    code = child.wait()
    if code:
        _record_exit(rank, restart, code)
    return 128 - code if code < 0 else code


def _note_environment(path: Path) -> None:
    """python.stage node-local: the environment this node's ranks run from, at the top of its first rank's log (the
    node's copy, or the shared one when staging failed and python.stage_fallback is shared, with the reason)."""
    fallback = os.environ.get("HPCLAUNCH_ENV_FALLBACK")
    if os.environ.get("HPCLAUNCH_ENV_KEY"):
        # the node's copy carries the base interpreter and hpclaunch where they are on a shared path (envcarry.py)
        note = (f"hpclaunch: python environment: {sys.prefix}\n"
                f"hpclaunch: python interpreter: {sys.base_prefix}; hpclaunch: {envcarry.PACKAGE}\n")
    elif fallback:
        note = (f"hpclaunch: python environment: {sys.prefix} (the shared one: python.stage_fallback shared, "
                f"{fallback})\n")
    else:
        return
    with open(path, "ab") as log:
        log.write(note.encode())


def _too_old() -> list[str]:
    """The packages this job needs (RUN_DIR/requires.json: none for a user's own script) that the environment holds
    older than their floor (importlib.metadata costs ~25 ms: imported here, once per node, not by every rank). A run
    directory written before requires.json: every floor."""
    from hpclaunch.runtime.node import envcheck

    try:
        needed = json.loads(runfiles.RunFiles.from_env().requires.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return envcheck.too_old()
    return envcheck.too_old(tuple(needed), floors=needed)


def _record_exit(rank: int, restart: int, code: int) -> None:
    """A rank that failed leaves its code and host, so a retry can blame (and exclude) the right node."""
    if not os.environ.get(runfiles.ENV_RUN_DIR):
        return
    path = runfiles.RunFiles.from_env().rank_exit(rank, restart)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rank": rank, "code": code, "host": socket.gethostname(),
                                    "time": round(time.time(), 3)}) + "\n")
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
