"""A light per-node usage sampler, run by each node's supervisor (hpclaunch/runtime/supervise.py) every
`HPCLAUNCH_SAMPLE_INTERVAL` seconds (30 by default) and once when the launch ends. One JSON line per sample
in RUN_DIR/usage/node-<N>.restart-<R>.jsonl:

    {"time", "node", "host", "cpus", "cpu_s", "rss_bytes", "devices": [{"index", "utilization", "memory_used_bytes",
     "memory_total_bytes"}] or null, "tool"}

`cpu_s` is the CPU time (user + system, /proc/PID/stat) of the job's processes on the node so far (each
process counted at the most it was seen with, so ranks that ended still count; the last sample, when the
launch has exited, takes the children's rusage, which has it all), `rss_bytes` their resident memory now
(a peak between two samples is not seen), `cpus` the CPUs the node's task may run on. Devices come from
`nvidia-smi --query-gpu` when it exists (none on a CPU node: `devices` is null and `tool` too). `report`
reads them (hpclaunch/usage.py): the job's own CPU efficiency and peak memory where Slurm accounting is off,
and device utilisation and memory always. Standard library only.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_INTERVAL = 30.0
INTERVAL_VAR = "HPCLAUNCH_SAMPLE_INTERVAL"
NVIDIA_QUERY = ["--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"]
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def parse_nvidia_query(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits``
    (``0, 87, 40531, 81559`` per GPU; MiB; ``[N/A]`` where the driver does not say) -> one dict per GPU."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        util, used, total = (float(c) if c.replace(".", "", 1).isdigit() else None for c in cells[1:])
        out.append({"index": int(cells[0]), "utilization": None if util is None else util / 100,
                    "memory_used_bytes": None if used is None else int(used * MIB),
                    "memory_total_bytes": None if total is None else int(total * MIB)})
    return out


def device_sample() -> tuple[str | None, list[dict[str, Any]] | None]:
    """(tool, one dict per device), or (None, None) on a node without nvidia-smi."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None, None
    try:
        proc = subprocess.run([tool, *NVIDIA_QUERY], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "nvidia-smi", []
    return "nvidia-smi", parse_nvidia_query(proc.stdout) if proc.returncode == 0 else []


def _proc(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, resident bytes) of a process, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3, utime 14, stime 15
    return (int(fields[11]) + int(fields[12])) / _TICKS, pages * _PAGE


def interval_from_env() -> float:
    try:
        return float(os.environ.get(INTERVAL_VAR, "") or DEFAULT_INTERVAL)
    except ValueError:
        return DEFAULT_INTERVAL


class Sampler:
    def __init__(self, path: Path, node: str, pids: Callable[[], list[int]], interval: float) -> None:
        self.path, self.node, self.pids, self.interval = path, node, pids, interval
        self.cpu_by_pid: dict[int, float] = {}
        self.next_at = time.time()  # the first sample at once: a short job still gets one
        self.cpus = len(os.sched_getaffinity(0))

    def poll(self, now: float) -> None:
        if now >= self.next_at:
            self.sample(now)

    def sample(self, now: float | None = None, *, ended: bool = False) -> dict[str, Any]:
        """One record, appended to the file. `ended`: the launch has exited, and the CPU time of every process
        it waited for (torchrun its ranks) is in this process's children's rusage, to the end."""
        now = time.time() if now is None else now
        self.next_at = now + self.interval
        rss = 0
        for pid in self.pids():
            found = _proc(pid)
            if found is None:
                continue
            cpu, resident = found
            self.cpu_by_pid[pid] = max(cpu, self.cpu_by_pid.get(pid, 0.0))
            rss += resident
        cpu_s = sum(self.cpu_by_pid.values())
        if ended:
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_s = max(cpu_s, children.ru_utime + children.ru_stime)
        tool, devices = device_sample()
        rec = {"time": round(now, 3), "node": self.node, "host": socket.gethostname(), "cpus": self.cpus,
               "cpu_s": round(cpu_s, 2), "rss_bytes": rss, "tool": tool, "devices": devices}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
        except OSError:
            pass  # a full or read-only run directory must not end the job
        return rec
