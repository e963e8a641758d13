"""The logs of a job submitted over SSH (docs/remote.md), streamed from the login node, never copied whole.

`listing` asks the login node for the names (and times) of the run directory's log files and lays them out here
as empty files, so that `RunFiles` picks the files to show as for a local run directory; `SshReader` then streams
the lines of each one (`tail -n N` there, or the whole file through the connection, filtered here). `follow`
streams the job's output (`tail -F` over SSH), where each rank's lines arrive prefixed with ``[rank<R>]:``, and
yields the events of hpclaunch.logs.follow until the job ends."""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.remote import SshHost
from hpclaunch.logs.follow import End, Event, Restart, State, lost
from hpclaunch.logs.read import Line
from hpclaunch.schedulers.base import JobStatus
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles

_RANK_ECHO = re.compile(rb"^\[rank(\d+)\]: ?")
_RESTART = re.compile(rb"^hpclaunch: job \S+ restart (\d+) ")


def listing(host: SshHost, run_dir: Path) -> RunFiles:
    """The log files of `run_dir` on the login node, as empty files (with their times) in a local folder."""
    root = hpclaunch_home() / "remote" / f"{run_dir.name}.logs"
    shutil.rmtree(root, ignore_errors=True)
    logs = RunFiles(root).logs
    logs.mkdir(parents=True)
    remote_logs = RunFiles(run_dir).logs
    out = host.run(["find", str(remote_logs), "-type", "f", "-printf", "%T@ %P\\n"], check=False).stdout
    for line in out.splitlines():
        stamp, _, rel = line.partition(" ")
        if not rel or rel.startswith("/") or ".." in Path(rel).parts:
            continue
        path = logs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (float(stamp), float(stamp)))
    return RunFiles(root)


class SshReader:
    """Reads the login node's file of each local stand-in (from `listing`) through the SSH connection."""

    def __init__(self, host: SshHost, local_root: Path, run_dir: Path):
        self.host, self.local_root, self.run_dir = host, local_root, run_dir

    def remote(self, path: Path) -> str:
        return str(self.run_dir / path.relative_to(self.local_root))

    def iter_lines(self, path: Path, pattern: re.Pattern[bytes] | None = None) -> Iterator[bytes]:
        proc = subprocess.Popen(self.host.command(["cat", "--", self.remote(path)]), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                line = raw.rstrip(b"\n")
                if pattern is None or pattern.search(line):
                    yield line
        finally:
            proc.stdout.close()
            proc.wait()

    def tail_lines(self, path: Path, n: int, pattern: re.Pattern[bytes] | None = None) -> list[bytes]:
        if n <= 0:
            return []
        if pattern is not None:  # the last n matching lines: every line passes through the connection once
            return list(deque(self.iter_lines(path, pattern), maxlen=n))
        out = self.host.run(["tail", "-n", str(n), "--", self.remote(path)], check=False).stdout
        return [ln.encode() for ln in out.splitlines()]


def _stream(host: SshHost, path: Path, from_end: bool) -> tuple[subprocess.Popen[bytes], queue.Queue[bytes | None]]:
    """`tail -F path` on the login node, its lines into a queue (None at its end). The remote tail ends when this
    side closes the session's input."""
    script = (f"tail -n {'0' if from_end else '+1'} -F {shlex.quote(str(path))} 2>/dev/null & t=$!; "
              "cat >/dev/null; kill $t")
    proc = subprocess.Popen(host.command(["sh", "-c", script]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    lines: queue.Queue[bytes | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.put(raw.rstrip(b"\n").rstrip(b"\r"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


def follow(host: SshHost, run_dir: Path, job_id: str, status: Callable[[], JobStatus], *, rank: int | None = None,
           pattern: re.Pattern[bytes] | None = None, start_at_end: bool = False, status_every: float = 5.0,
           settle: float = 2.0, unknown_limit: int = 5) -> Iterator[Event]:
    """Events of the job until `status()` says it has ended: its output streamed by `tail -F` over SSH."""
    proc, lines = _stream(host, RunFiles(run_dir).job_output(job_id), start_at_end)
    state = {"restart": 0}
    shown: tuple[str, str | None] | None = None
    unknown = 0
    try:
        while True:
            now = status()
            unknown = unknown + 1 if now.state == "UNKNOWN" else 0
            ended = now.finished or unknown >= unknown_limit
            if not ended and now.state != "UNKNOWN" and (now.state, now.reason) != shown:
                shown = (now.state, now.reason)
                yield State(now)
            deadline = time.monotonic() + (settle if ended else status_every)
            yield from _drain(lines, deadline, state, rank, pattern)
            if ended:
                if now.state == "UNKNOWN":
                    raise lost(job_id, run_dir, unknown)
                yield End(now)
                return
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _drain(lines: queue.Queue[bytes | None], deadline: float, state: dict[str, int], rank: int | None,
           pattern: re.Pattern[bytes] | None) -> Iterator[Event]:
    """The lines streamed until `deadline`, as events: a rank's line (its ``[rank<R>]:`` taken off), a line of the
    job script's own (rank None), a Restart where the job script says a new restart begins."""
    while (left := deadline - time.monotonic()) > 0:
        try:
            raw = lines.get(timeout=left)
        except queue.Empty:
            return
        if raw is None:
            time.sleep(max(0.0, deadline - time.monotonic()))
            return
        m = _RANK_ECHO.match(raw)
        restart = _RESTART.match(raw)
        if restart and int(restart.group(1)) > state["restart"]:
            state["restart"] = int(restart.group(1))
            yield Restart(state["restart"])
        who = int(m.group(1)) if m else None
        text = raw[m.end():] if m else raw
        if (rank is not None and who != rank) or (pattern is not None and not pattern.search(text)):
            continue
        yield Line(who, state["restart"], text.decode("utf-8", "replace"))


def follow_record(record: registry.JobRecord, *, rank: int | None = None, pattern: re.Pattern[bytes] | None = None,
                  start_at_end: bool = False) -> Iterator[Event]:
    """`follow` for a recorded job submitted over SSH: its status from its scheduler there."""
    from hpclaunch.core.remote import ssh_host
    from hpclaunch.schedulers import get_scheduler

    assert record.remote is not None
    scheduler = get_scheduler(record.scheduler, record.remote)
    return follow(ssh_host(record.remote), Path(record.run_dir), record.job_id,
                  lambda: scheduler.status([record.job_id])[record.job_id], rank=rank, pattern=pattern,
                  start_at_end=start_at_end)
