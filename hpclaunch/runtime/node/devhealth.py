"""What the accelerator vendors' tools say about a device's health, parsed from their text (node health before
step 0: hpclaunch/runtime/node/health.py). Each parser returns, per device, the problems that should keep a job
off the node (an empty list: healthy). Tested against recorded outputs in tests/fixtures/device-tools/.

    nvidia-smi -q          volatile uncorrectable ECC errors (SRAM, DRAM; older GPUs: Double Bit totals),
                           retired pages pending, row remapping pending or failed, a reset required
    npu-smi info           each NPU's Health column: Alarm or Critical (Warning is kept as a note, not a failure)
    kernel log (dmesg)     NVIDIA Xid events: noted, never a failure (the log keeps every Xid since boot, also
                           those a reset has cleared)

mthreads-gmi's table has no health column: a Moore Threads node is checked for its device count only.
Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

from hpclaunch.runtime.node.sampler import npu_smi_chips


def nvidia_q_sections(text: str) -> list[dict[tuple[str, ...], str]]:
    """``nvidia-smi -q`` -> one dict per ``GPU <bus id>`` block: the path of section names to each value,
    e.g. ``("ECC Errors", "Volatile", "DRAM Uncorrectable"): "0"``, and ``("Bus Id",)`` the block's own id."""
    gpus: list[dict[tuple[str, ...], str]] = []
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.strip() == "[...]":
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            stack = []
            if line.startswith("GPU "):
                gpus.append({("Bus Id",): line[4:].strip()})
            continue
        if not gpus:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        if sep and value:
            gpus[-1][tuple(name for _, name in stack) + (key,)] = value
        else:
            stack.append((indent, key))
    return gpus


def _count(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0


def nvidia_problems(block: dict[tuple[str, ...], str]) -> list[str]:
    """The problems of one GPU block of ``nvidia-smi -q`` (N/A, a feature the GPU lacks, is no problem)."""
    out = []
    for path, value in block.items():
        if len(path) >= 3 and path[:2] == ("ECC Errors", "Volatile") and "Uncorrectable" in path[2]:
            if _count(value):
                out.append(f"{value} volatile {path[2]} ECC errors")
        elif path[:2] == ("ECC Errors", "Volatile") and path[-2:] == ("Double Bit", "Total") and _count(value):
            out.append(f"{value} volatile double-bit ECC errors")
    flags = {("Retired Pages", "Pending Page Blacklist"): "retired pages pending (reset the GPU)",
             ("Retired Pages", "Pending"): "retired pages pending (reset the GPU)",
             ("Remapped Rows", "Pending"): "row remapping pending (reset the GPU)",
             ("Remapped Rows", "Remapping Failure Occurred"): "row remapping failed (replace the GPU)",
             ("GPU Reset Status", "Reset Required"): "the GPU needs a reset",
             ("GPU Reset Status", "Drain and Reset Recommended"): "drain and reset recommended"}
    out += [problem for path, problem in flags.items() if block.get(path, "").lower() == "yes"]
    return out


def parse_nvidia_q(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -q`` -> ``[{"device": bus id, "problems": [...]}]``, one per GPU."""
    return [{"device": b[("Bus Id",)], "problems": nvidia_problems(b)} for b in nvidia_q_sections(text)]


NPU_FAILING = frozenset({"alarm", "critical"})


def parse_npu_health(text: str) -> list[dict[str, Any]]:
    """``npu-smi info`` -> ``[{"device": "npu <id> (<name>)", "health": "OK", "problems": [...]}]``, one per NPU
    (its first row: ``| 0     910B3  | OK  | ...``; an A3's two chips share one)."""
    out: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        head = cells[0].split() if cells else []
        if len(cells) < 3 or len(head) < 2 or not head[0].isdigit() or not cells[1][:1].isalpha():
            continue
        health = cells[1].split()[0]
        problems = [f"health {health}"] if health.lower() in NPU_FAILING else []
        out.setdefault(int(head[0]), {"device": f"npu {head[0]} ({head[1]})", "health": health, "problems": problems})
    chips = {npu for npu, _name, _cells in npu_smi_chips(text)}
    return [rec for npu, rec in sorted(out.items()) if npu in chips]


_XID = re.compile(r"NVRM: Xid \((PCI:[^)]*)\): (\d+)(?:, (.*))?")


def parse_xids(text: str) -> list[dict[str, Any]]:
    """Kernel log lines ``NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: ...`` -> their device, Xid code
    and message, in log order."""
    return [{"device": m.group(1), "xid": int(m.group(2)), "message": (m.group(3) or "").strip()}
            for m in map(_XID.search, text.splitlines()) if m]
