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
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

from hpclaunch.runtime.node import envcarry, nodestage
from hpclaunch.state import runfiles, timeline

# a rank's output lines reach its log and the job's output at most this many seconds late (`hpclaunch logs -f` lags
# by as much), batched into one write each (docs/scale.md); a batch of this many bytes is written at once
FLUSH_S = 5.0
ENV_FLUSH_S = "HPCLAUNCH_LOG_FLUSH_S"  # another number of seconds, set where the job is submitted (0: at once)
FLUSH_BYTES = 1 << 16
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

    told_r, told_w = os.pipe()  # a signal passed on: the lines held are written now, and the next ones at once

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)
        os.write(told_w, b"!")

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    assert child.stdout is not None
    with open(path, "ab", buffering=0) as log:
        _copy_lines(child.stdout.fileno(), log, prefix, told_r, _flush_s())
    code = child.wait()
    if code:
        _record_exit(rank, restart, code)
    return 128 - code if code < 0 else code


def _copy_lines(fd: int, log: BinaryIO, prefix: bytes, told: int, flush_s: float = FLUSH_S) -> None:
    """Copy the child's output from `fd` until it ends to its rank log and, prefixed, to this process's stdout (the
    job's output), both on the shared filesystem: the lines of up to `flush_s` seconds (and at most FLUSH_BYTES) in
    one write each, so a node's log lines cost the shared filesystem a write every few seconds, not one per line.
    Everything the child wrote is written when it ends, however it ends (its last lines before a crash are what
    diagnosis reads); a partial last line as it is. Once `told` is readable (a signal was passed on: the job is
    stopping, and a kill may follow) the lines held are written at once, and every line from then on."""
    out = sys.stdout.buffer
    held: list[bytes] = []
    partial, due = b"", float("inf")  # due: when the oldest line held must be written

    def flush() -> None:
        log.write(b"".join(held))
        out.write(b"".join(x if x.startswith(prefix) else prefix + x for x in held))  # torch prefixes a traceback
        out.flush()
        held.clear()

    while True:
        ready = select.select([fd, told], [], [], None if not held else max(0.0, due - time.monotonic()))[0]
        if told in ready:
            os.read(told, 64)
            flush_s = due = 0.0
        if fd in ready:
            chunk = os.read(fd, FLUSH_BYTES)
            if not chunk:
                break
            *lines, partial = (partial + chunk).split(b"\n")
            if lines and not held:
                due = time.monotonic() + flush_s
            held += [x + b"\n" for x in lines]
        if held and (time.monotonic() >= due or sum(map(len, held)) >= FLUSH_BYTES):
            flush()
    held += [partial] if partial else []
    if held:
        flush()


def _flush_s() -> float:
    """HPCLAUNCH_LOG_FLUSH_S where set to a number of seconds (0: every line at once), else FLUSH_S."""
    try:
        return max(0.0, float(os.environ.get(ENV_FLUSH_S) or FLUSH_S))
    except ValueError:
        return FLUSH_S


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
