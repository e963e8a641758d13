"""Slow nodes of a run, as `status` and `report` show them: node 0's supervisor's findings
(``RUN_DIR/logs/slow.restart-<N>.json``, hpclaunch/runtime/node/slowswap.py), each with what came of it: swapped
for a spare (its recovery in recoveries.jsonl, cause ``slow``), only reported (no spare free, no swap or relaunch
left), or a swap asked that no relaunch followed (the job was stopped first). Standard library only.
"""

from __future__ import annotations

import json
from typing import Any

from hpclaunch.state.runfiles import RunFiles, read_json_lines


def load(run: RunFiles) -> list[dict[str, Any]]:
    """One entry per finding, oldest first: host, rank, ratio, windows, window_steps, first_step, step, restart,
    decided_at, action (swap | report), swapped (bool), text (in words, what came of it)."""
    swaps = {rec.get("restart"): rec for rec in read_json_lines(run.recoveries) if rec.get("cause") == "slow"}
    out = []
    for path in run.slow_verdicts():
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(found, dict):
            continue
        swap = swaps.get(found.get("restart"))
        text = str(swap.get("reason")) if swap else str(found.get("text"))
        out.append({**{k: found.get(k) for k in ("host", "rank", "ratio", "windows", "window_steps", "first_step",
                                                 "step", "restart", "decided_at", "action")},
                    "swapped": swap is not None, "text": text})
    return out


def line(found: dict[str, Any]) -> str:
    """``node3 slow for 5 windows (1.6x the median): swapped at step 400 for node5``"""
    return str(found["text"])
