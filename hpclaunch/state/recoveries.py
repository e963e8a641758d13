"""The recoveries of a run: ``RUN_DIR/recoveries.jsonl``, one line per relaunch inside the allocation
(written by hpclaunch/runtime/node/relaunch.py), read back with the time from the fault's detection to the
first training step after it (`seconds_to_first_step`, from the timeline's ``first_step`` stamp of the restart
that resumed; None while that step has not finished). `status JOB --json` lists them. Standard library only.
"""

from __future__ import annotations

from typing import Any

from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles, read_json_lines

FIELDS = ("cause", "rank", "node", "detected_at", "resumed_step", "seconds_to_first_step")


def load(run: RunFiles) -> list[dict[str, Any]]:
    """Each recovery, oldest first: cause, rank, node, detected_at, resumed_step, seconds_to_first_step, and the
    restart it ended, the one it started, the nodes of the relaunch and those dropped so far, the reason."""
    first_steps: dict[int, float] = {}
    for stamp in timeline.read(run):
        if stamp["phase"] == "first_step":
            first_steps[stamp["restart"]] = float(stamp["t"])
    out = []
    for rec in read_json_lines(run.recoveries):
        detected, resumed = rec.get("detected_at"), rec.get("resumed_restart")
        first = first_steps.get(resumed) if isinstance(resumed, int) else None
        took = round(first - detected, 1) if first is not None and isinstance(detected, (int, float)) else None
        out.append({**{key: rec.get(key) for key in FIELDS}, "seconds_to_first_step": took,
                    **{k: v for k, v in rec.items() if k not in FIELDS}})
    return out


def line(rec: dict[str, Any]) -> str:
    """``node_lost: rank 0 on node1, resumed from step 8 on node2,node3, first step 9.4 s after``."""
    took = rec.get("seconds_to_first_step")
    after = f"first step {took} s after" if took is not None else "no step finished after it yet"
    return (f"{rec.get('cause')}: rank {rec.get('rank')} on {rec.get('node')}, resumed from step "
            f"{rec.get('resumed_step')} on {rec.get('nodes')}, {after}")
