"""A light per-node usage sampler, run by each node's supervisor (hpclaunch/runtime/node/supervise.py) every
`HPCLAUNCH_SAMPLE_INTERVAL` seconds (30 by default) and once when the launch ends. One JSON line per sample
in RUN_DIR/usage/node-<N>.restart-<R>.jsonl, appended in batches: the first sample at once, then what was
sampled since every FLUSH_INTERVAL s and at the end (one write into the shared run directory per node per
FLUSH_INTERVAL, not per sample; a node lost with everything on it loses at most that much of its history):

    {"time", "node", "host", "cpus", "cpu_s", "rss_bytes", "peak_rss_bytes", "devices": [{"index", "utilization",
     "memory_used_bytes", "memory_total_bytes", "power_w"}] or null, "tool"}

`cpu_s` is the CPU time (user + system, /proc/PID/stat) of the job's processes on the node so far (each
process counted at the most it was seen with, so ranks that ended still count; the last sample, when the
launch has exited, takes the children's rusage, which has it all), `rss_bytes` their resident memory now,
`peak_rss_bytes` the sum of each process's high-water mark so far (VmHWM, read at every sample and every
PEAK_INTERVAL s between them, and at the end at least the largest rank's peak from the children's rusage: a
short job's peak is seen), `cpus` the CPUs the node's task may run on. Devices come from the
first vendor tool on PATH (DEVICE_TOOLS), in this order:

    nvidia-smi    --query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw (CSV)  utilisation,
                  memory, power draw (W)
    npu-smi       info (its table; one device per chip)          AICore(%), HBM-Usage(MB), Power(W)
    mthreads-gmi  (its default table)                            %GPU, Mem used(total); no power (power_w null)

`utilization` is a fraction (0.87 = 87%), memory in bytes, and a value the tool does not give (N/A, -) is
null. On a CPU node `devices` is null and `tool` too; when the tool exists but fails, `devices` is [].
`report` reads them (hpclaunch/report/usage.py): the job's own CPU efficiency and peak memory where Slurm accounting
is off, and device utilisation and memory always. The recorded outputs the parsers are tested against are
in tests/fixtures/device-tools/. Standard library only.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_INTERVAL = 30.0
FLUSH_INTERVAL = 600.0  # seconds between appends of the samples taken since (the shared filesystem's load)
PEAK_INTERVAL = 2.0  # seconds between readings of the processes' high-water marks
INTERVAL_VAR = "HPCLAUNCH_SAMPLE_INTERVAL"
NVIDIA_FIELDS = ("index", "utilization.gpu", "memory.used", "memory.total", "power.draw")
NVIDIA_QUERY = [f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"]
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def parse_nvidia_query(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw
    --format=csv,noheader,nounits`` (``0, 87, 40531, 81559, 312.45`` per GPU; MiB, W; ``[N/A]`` where the driver
    does not say; the first four columns alone from an older sampler) -> one dict per GPU. A header line
    (``--format=csv``: ``index, utilization.gpu [%], ...``) names the columns instead, in any order and with
    others among them, and the values may carry their units (``84.33 W``, ``0 %``, ``2 MiB``)."""
    fields = list(NVIDIA_FIELDS)
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        names = [c.split(" [", 1)[0] for c in cells]
        if "index" in names and "memory.used" in names:
            fields = names
            continue
        if not 4 <= len(cells) <= len(fields):
            continue
        row = dict(zip(fields, cells, strict=False))
        if not row.get("index", "").isdigit():
            continue
        util, used, total, power = (_first_number(row.get(k, "")) for k in NVIDIA_FIELDS[1:])
        out.append({"index": int(row["index"]), "utilization": None if util is None else util / 100,
                    "memory_used_bytes": None if used is None else int(used * MIB),
                    "memory_total_bytes": None if total is None else int(total * MIB), "power_w": power})
    return out


def _first_number(cell: str) -> float | None:
    """``84.33 W`` / ``84.33`` -> 84.33; ``[N/A]``, ``[Not Supported]``, empty -> None."""
    word = cell.split(" ", 1)[0] if cell else ""
    return float(word) if _NUMBER.match(word) else None


_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_BUS_ID = re.compile(r"^[0-9a-fx]+:[0-9a-fx]+:[0-9a-fx]+\.[0-9a-fx]+$", re.IGNORECASE)
_USED_TOTAL = re.compile(r"(\d+)\s*/\s*(\d+)")


def _percent(text: str) -> float | None:
    """A percentage as the tools print it (87, 87%) -> 0.87; what they print for none (-, N/A, NA) -> None."""
    text = text.strip().rstrip("%")
    return float(text) / 100 if _NUMBER.match(text) else None


def parse_npu_smi_info(text: str) -> list[dict[str, Any]]:
    """``npu-smi info``: two rows per chip, the first with the NPU id, name and health, the second with the
    chip (and on Atlas A3, whose NPUs have two chips, its Phy-ID), the Bus-Id, AICore(%), Memory-Usage(MB)
    and HBM-Usage(MB) as used / total::

        | 0     910B3               | OK            | 121.6       40                0    / 0             |
        | 0                         | 0000:C1:00.0  | 10          0    / 0          57895/ 65536         |

    -> one dict per chip: index = the Phy-ID where the table has one (the logical device id that
    ASCEND_RT_VISIBLE_DEVICES counts), else the NPU id; utilisation = AICore; memory = the last used / total
    pair whose total is not 0 (HBM-Usage: on 910B Memory-Usage reads 0 / 0), none when there is no such pair.
    The process table below is not read: its rows have a process id where the second row has a Bus-Id."""
    out = []
    for npu, _name, first, cells in _npu_smi_rows(text):
        chip = cells[0].split()
        stats = cells[2].split(None, 1)
        pairs = [(int(u), int(t)) for u, t in _USED_TOTAL.findall(stats[1] if len(stats) > 1 else "") if int(t)]
        used, total = pairs[-1] if pairs else (None, None)
        out.append({"index": int(chip[1]) if len(chip) > 1 and chip[1].isdigit() else npu,
                    "utilization": _percent(stats[0]) if stats else None,
                    "memory_used_bytes": None if used is None else used * MIB,
                    "memory_total_bytes": None if total is None else total * MIB,
                    "power_w": _first_number(first[2].split(None, 1)[0]) if first[2].strip() else None})
    return out


def npu_smi_chips(text: str) -> list[tuple[int, str, list[str]]]:
    """``npu-smi info``'s chips: (NPU id, name, the cells of the chip's second row), one per second row that
    follows a first row (provenance counts and names the devices from these too)."""
    return [(npu, name, cells) for npu, name, _first, cells in _npu_smi_rows(text)]


def _npu_smi_rows(text: str) -> list[tuple[int, str, list[str], list[str]]]:
    """(NPU id, name, the cells of the chip's first row, of its second row) of each chip (on Atlas A3 the second
    chip's first row reads ``-`` for its power)."""
    out = []
    first: tuple[int, str, list[str]] | None = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0][:1].isdigit():
            continue
        if not _BUS_ID.match(cells[1]):
            head = cells[0].split()
            # a first row: NPU id and name, then the health (OK, Warning, ...); a process row has a process id there
            first = (int(head[0]), head[1], cells) if len(head) > 1 and cells[1][:1].isalpha() else None
            continue
        if first is not None:
            out.append((*first, cells))
    return out


_GMI_ROW = re.compile(r"^(\d+)\s+(\S.*?)\s*\|[^|]*\|\s*(\S+)\s+(\S+)")  # id, name | PCIe | %GPU Mem
_GMI_MEM = re.compile(r"^(\d+(?:\.\d+)?)MiB\((\d+(?:\.\d+)?)MiB\)$")


def parse_mthreads_gmi(text: str) -> list[dict[str, Any]]:
    """``mthreads-gmi`` (no arguments): three rows per GPU, the first with the id, name, PCIe address, %GPU
    and Mem as used(total)::

        0    MTT S5000            |00000000:2a:00.0    |0%    66641MiB(81920MiB)

    -> one dict per GPU. The other rows start with blanks, the process table's rows have no ``|``."""
    out = []
    for m in mthreads_gmi_rows(text):
        mem = _GMI_MEM.match(m.group(4))
        out.append({"index": int(m.group(1)), "utilization": _percent(m.group(3)),
                    "memory_used_bytes": int(float(mem.group(1)) * MIB) if mem else None,
                    "memory_total_bytes": int(float(mem.group(2)) * MIB) if mem else None,
                    "power_w": None})  # the default table shows no power (see tests/fixtures/device-tools)
    return out


def mthreads_gmi_rows(text: str) -> list[re.Match[str]]:
    """Each GPU's first row of ``mthreads-gmi``'s table: groups id, name, %GPU, Mem (provenance reads the names)."""
    return [m for line in text.splitlines() if (m := _GMI_ROW.match(line))]


DEVICE_TOOLS: tuple[tuple[str, list[str], Callable[[str], list[dict[str, Any]]]], ...] = (
    ("nvidia-smi", NVIDIA_QUERY, parse_nvidia_query),
    ("npu-smi", ["info"], parse_npu_smi_info),
    ("mthreads-gmi", [], parse_mthreads_gmi),
)


@functools.lru_cache(maxsize=4)
def _device_tool(search: str) -> tuple[str, str, list[str], Callable[[str], list[dict[str, Any]]]] | None:
    """The first tool of DEVICE_TOOLS on the PATH `search`, looked up once per PATH: every lookup stats each PATH
    entry, and on a cluster those are often on the shared filesystem (module trees, conda envs)."""
    for tool, args, parse in DEVICE_TOOLS:
        path = shutil.which(tool, path=search)
        if path is not None:
            return tool, path, args, parse
    return None


def device_sample() -> tuple[str | None, list[dict[str, Any]] | None]:
    """(tool, one dict per device) from the first tool of DEVICE_TOOLS on PATH; (tool, []) when it fails or
    says nothing we read; (None, None) on a node with none of them."""
    found = _device_tool(os.environ.get("PATH", os.defpath))
    if found is not None:
        tool, path, args, parse = found
        try:
            proc = subprocess.run([path, *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return tool, []
        return tool, parse(proc.stdout) if proc.returncode == 0 else []
    return None, None


def _proc(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, resident bytes) of a process, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3, utime 14, stime 15
    return (int(fields[11]) + int(fields[12])) / _TICKS, pages * _PAGE


def _high_water(pid: int) -> int | None:
    """A process's peak resident memory so far (VmHWM of /proc/PID/status), in bytes; None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def interval_from_env() -> float:
    try:
        return float(os.environ.get(INTERVAL_VAR, "") or DEFAULT_INTERVAL)
    except ValueError:
        return DEFAULT_INTERVAL


class Sampler:
    def __init__(self, path: Path, node: str, pids: Callable[[], list[int]], interval: float,
                 flush_interval: float = 0.0) -> None:
        self.path, self.node, self.pids, self.interval = path, node, pids, interval
        self.flush_interval = flush_interval  # 0: every sample written at once
        self.pending: list[str] = []
        self.flushed_at = float("-inf")
        self.cpu_by_pid: dict[int, float] = {}
        self.hwm_by_pid: dict[int, int] = {}
        self.next_at = time.time()  # the first sample at once: a short job still gets one
        self.peaks_at = 0.0
        self.cpus = len(os.sched_getaffinity(0))

    def poll(self, now: float) -> None:
        if now >= self.next_at:
            self.sample(now)
        elif now >= self.peaks_at:
            self.track_peaks(now)

    def track_peaks(self, now: float) -> None:
        """Each process's high-water mark, read every PEAK_INTERVAL s between samples: a rank that lives
        between two samples still counts with its peak."""
        self.peaks_at = now + PEAK_INTERVAL
        for pid in self.pids():
            hwm = _high_water(pid)
            if hwm is not None:
                self.hwm_by_pid[pid] = max(hwm, self.hwm_by_pid.get(pid, 0))

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
            self.hwm_by_pid[pid] = max(_high_water(pid) or resident, self.hwm_by_pid.get(pid, 0))
            rss += resident
        cpu_s, peak = sum(self.cpu_by_pid.values()), sum(self.hwm_by_pid.values())
        if ended:
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_s = max(cpu_s, children.ru_utime + children.ru_stime)
            peak = max(peak, children.ru_maxrss * 1024)  # the largest waited-for descendant's peak (kB)
        tool, devices = device_sample()
        rec = {"time": round(now, 3), "node": self.node, "host": socket.gethostname(), "cpus": self.cpus,
               "cpu_s": round(cpu_s, 2), "rss_bytes": rss, "peak_rss_bytes": peak, "tool": tool,
               "devices": devices}
        self.pending.append(json.dumps(rec) + "\n")
        if ended or now - self.flushed_at >= self.flush_interval:
            self.flush(now)
        return rec

    def flush(self, now: float) -> None:
        """Append the samples not written yet, in one write."""
        self.flushed_at = now
        if not self.pending:
            return
        text, self.pending = "".join(self.pending), []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(text)
        except OSError:
            pass  # a full or read-only run directory must not end the job
