"""Follow a job's rank logs live: print new complete lines of every rank file as they are written,
pick up the files of a new restart when they appear, and stop when the job has ended."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hpclaunch.logs.read import Line
from hpclaunch.runfiles import RunFiles


def follow(run_dir: Path, finished: Callable[[], bool], *, rank: int | None = None,
           pattern: re.Pattern[bytes] | None = None, poll: float = 0.5,
           status_every: float = 2.0, start_at_end: bool = False) -> Iterator[Line]:
    offsets: dict[Path, int] = {}
    partial: dict[Path, bytes] = {}
    last_check = 0.0
    done = False
    first = True
    while True:
        now = time.monotonic()
        if now - last_check >= status_every:
            done = finished()  # asked before the last read, so nothing written before the end is lost
            last_check = now
        for lf in RunFiles(run_dir).rank_logs(rank=rank):
            if lf.path not in offsets:
                offsets[lf.path] = lf.path.stat().st_size if (first and start_at_end) else 0
            with open(lf.path, "rb") as f:
                f.seek(offsets[lf.path])
                data = f.read()
            if not data:
                continue
            offsets[lf.path] += len(data)
            data = partial.pop(lf.path, b"") + data
            *lines, rest = data.split(b"\n")
            if rest:
                partial[lf.path] = rest
            for raw in lines:
                if pattern is None or pattern.search(raw):
                    yield Line(lf.rank, lf.restart, raw.decode("utf-8", "replace").rstrip("\r"))
        first = False
        if done:
            for path, rest in partial.items():
                lf_rank = next(f for f in RunFiles(run_dir).rank_logs(rank=rank) if f.path == path)
                if pattern is None or pattern.search(rest):
                    yield Line(lf_rank.rank, lf_rank.restart, rest.decode("utf-8", "replace"))
            return
        time.sleep(poll)
