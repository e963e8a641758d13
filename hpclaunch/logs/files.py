"""Which log files a run directory holds, named as in `hpclaunch.runtime.logfiles`:

    logs/rank-<R>.restart-<N>.log                        torchrun, DeepSpeed (one per rank and restart)
    logs/msrun/node<K>.restart-<N>/worker_<R>.log        msrun workers
    logs/job.<jobid>.out                                 the batch script's output
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.runtime.logfiles import RANK_LOG

_MSRUN_DIR = re.compile(r"^node(\d+)\.restart-(\d+)$")
_WORKER = re.compile(r"^worker_(\d+)\.log$")


@dataclass(frozen=True, order=True)
class LogFile:
    restart: int
    rank: int
    path: Path
    kind: str = "rank"  # rank | msrun

    @property
    def label(self) -> str:
        return f"rank{self.rank}"


def find_rank_logs(run_dir: Path, *, rank: int | None = None, restart: int | None = None) -> list[LogFile]:
    """Every per-rank log file, ordered by restart then rank."""
    logs = Path(run_dir) / "logs"
    found: list[LogFile] = []
    if logs.is_dir():
        for p in logs.iterdir():
            m = RANK_LOG.match(p.name)
            if m:
                found.append(LogFile(int(m.group(2)), int(m.group(1)), p))
        msrun = logs / "msrun"
        if msrun.is_dir():
            for d in msrun.iterdir():
                dm = _MSRUN_DIR.match(d.name)
                if not dm or not d.is_dir():
                    continue
                for p in d.iterdir():
                    wm = _WORKER.match(p.name)
                    if wm:
                        found.append(LogFile(int(dm.group(2)), int(wm.group(1)), p, "msrun"))
    if rank is not None:
        found = [f for f in found if f.rank == rank]
    if restart is not None:
        found = [f for f in found if f.restart == restart]
    return sorted(found)


def batch_outputs(run_dir: Path) -> list[Path]:
    """The batch scripts' output files (`job.<id>.out`), oldest first."""
    logs = Path(run_dir) / "logs"
    if not logs.is_dir():
        return []
    return sorted(logs.glob("job.*.out"), key=lambda p: (p.stat().st_mtime, p.name))


def restarts(files: list[LogFile]) -> list[int]:
    return sorted({f.restart for f in files})
