"""What an msrun node shows on the job's output: ``python -m hpclaunch.runtime.node.msrun_tail LOG_DIR PID``.

msrun (``--join=True``) copies its workers' logs to its own output unprefixed, mostly MindSpore's own
``[INFO]``/``[WARNING]`` lines. The node supervisor (msrun-node.sh) sends msrun's output to
``msrun.out`` only, and runs this follower instead: it follows ``LOG_DIR/worker_<R>.log`` (new workers'
files are picked up), prints each line prefixed ``[rank<R>]: `` as the torch ranks' lines are, and leaves
MindSpore's INFO/WARNING/DEBUG lines in the files (its ERROR lines are shown). It ends once process PID
(msrun) is gone and every file is read to its end. Standard library only.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import TextIO

_WORKER = re.compile(r"^worker_(\d+)\.log$")
# MindSpore's own log lines: "[WARNING] DISTRIBUTED(16406,7fdd015c8b80,python):2026-11-23-03:17:47.625.358 [...]"
NOISE = re.compile(r"^\[(?:INFO|WARNING|DEBUG)\] [A-Z_]+\(\d+,")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def follow(log_dir: Path, pid: int, out: TextIO = sys.stdout, poll: float = 0.2) -> None:
    offsets: dict[Path, int] = {}
    partial: dict[Path, bytes] = {}
    while True:
        running = _alive(pid)
        for path in sorted(log_dir.glob("worker_*.log")):
            m = _WORKER.match(path.name)
            if not m:
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(offsets.get(path, 0))
                    data = f.read()
                    offsets[path] = f.tell()
            except OSError:
                continue
            data = partial.pop(path, b"") + data
            lines = data.split(b"\n")
            if lines[-1]:
                partial[path] = lines[-1]
            for raw in lines[:-1]:
                line = raw.decode("utf-8", "replace")
                if not NOISE.match(line):
                    out.write(f"[rank{m.group(1)}]: {line}\n")
        out.flush()
        if not running:
            for path, rest in partial.items():  # a last line without its newline
                rank = path.name.removeprefix("worker_").removesuffix(".log")
                out.write(f"[rank{rank}]: {rest.decode('utf-8', 'replace')}\n")
            out.flush()
            return
        time.sleep(poll)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m hpclaunch.runtime.node.msrun_tail LOG_DIR PID", file=sys.stderr)
        return 2
    follow(Path(argv[0]), int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
