"""The recoveries of a run: ``RUN_DIR/recoveries.jsonl``, one line per relaunch inside the allocation
(written by hpclaunch/runtime/node/relaunch.py), read back with the time from the fault's detection to the
first training step after it (`seconds_to_first_step`, from the timeline's ``first_step`` stamp of the restart
that resumed; None while that step has not finished). `status JOB --json` lists them. Standard library only.

Where the relaunched ranks' state came from, rank 0 says in ``RUN_DIR/progress/resumed.restart-<N>.json``
(hpclaunch/runtime/train/peer.py): ``source`` ``peer`` (the state in node memory, not on disk: a surviving
data-parallel replica's snapshot, or under DeepSpeed ZeRO-1/2 each rank's own partition, said by
``zero_partitions``: dspeer.py) or ``checkpoint``, and the step; a checkpoint taken although some rank held a
newer step in node memory says why in ``peer_missed`` (e.g. ``rank 1: none in node3's memory``: its node was
replaced), kept in the recovery. Read back, a recovery's ``resumed_step`` is that step (the relaunch
decision's guess, the newest checkpoint then, stays in ``checkpoint_step``), and ``recomputed_steps`` the steps
from it to the furthest step any rank of the failed launch had finished (its progress records).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles, read_json_lines

FIELDS = ("cause", "rank", "node", "detected_at", "resumed_step", "source", "recomputed_steps",
          "seconds_to_first_step")
SOURCES = ("peer", "checkpoint")


def resumed_file(run: RunFiles, restart: int) -> Path:
    """Where rank 0 says where a restart's state came from (written once per restart that resumed)."""
    return run.progress / f"resumed.restart-{restart}.json"


def resumed(run: RunFiles, restart: int) -> dict[str, Any] | None:
    """A restart's resume record: step, source (peer | checkpoint), ...; None when it wrote none."""
    try:
        rec = json.loads(resumed_file(run, restart).read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("step"), int) else None


def reached(run: RunFiles, restart: int) -> int | None:
    """The furthest step any rank of a restart finished, from its progress records (None: no record)."""
    steps = [s for r in run.progress_records(restart).values() if isinstance(s := r.get("step"), int)]
    return max(steps, default=None)


def load(run: RunFiles) -> list[dict[str, Any]]:
    """Each recovery, oldest first: cause, rank, node, detected_at, resumed_step, source, recomputed_steps,
    seconds_to_first_step, and the restart it ended, the one it started, the nodes of the relaunch and those
    dropped so far, the reason."""
    first_steps: dict[int, float] = {}
    for stamp in timeline.read(run):
        if stamp["phase"] == "first_step":
            first_steps[stamp["restart"]] = float(stamp["t"])
    out = []
    for rec in read_json_lines(run.recoveries):
        detected, resumed_in = rec.get("detected_at"), rec.get("resumed_restart")
        first = first_steps.get(resumed_in) if isinstance(resumed_in, int) else None
        took = round(first - detected, 1) if first is not None and isinstance(detected, (int, float)) else None
        rec = {**rec, "checkpoint_step": rec.get("resumed_step")}
        came = resumed(run, resumed_in) if isinstance(resumed_in, int) else None
        if came is not None:
            rec.update(resumed_step=came["step"], source=came.get("source", "checkpoint"))
            if came.get("peer_missed"):
                rec["peer_missed"] = came["peer_missed"]
        elif first is not None:  # resumed before the ranks said where from: the checkpoint
            rec["source"] = "checkpoint"
        ended = rec.get("restart")
        top = reached(run, ended) if isinstance(ended, int) else None
        if top is not None and isinstance(rec.get("resumed_step"), int) and (came is not None or first is not None):
            rec["recomputed_steps"] = max(0, top - rec["resumed_step"])
        out.append({**{key: rec.get(key) for key in FIELDS}, "seconds_to_first_step": took,
                    **{k: v for k, v in rec.items() if k not in FIELDS}})
    return out


def line(rec: dict[str, Any]) -> str:
    """``node_lost: rank 0 on node1, resumed from step 8 (peer) on node2,node3, 0 steps recomputed, first step
    9.4 s after``; a checkpoint taken although node memory held a newer step says why: ``(checkpoint; not from node
    memory: rank 1: none in node3's memory)``."""
    took = rec.get("seconds_to_first_step")
    after = f"first step {took} s after" if took is not None else "no step finished after it yet"
    missed = f"; not from node memory: {rec['peer_missed']}" if rec.get("peer_missed") else ""
    source = f" ({rec['source']}{missed})" if rec.get("source") else ""
    again = f", {rec['recomputed_steps']} steps recomputed" if rec.get("recomputed_steps") is not None else ""
    return (f"{rec.get('cause')}: rank {rec.get('rank')} on {rec.get('node')}, resumed from step "
            f"{rec.get('resumed_step')}{source} on {rec.get('nodes')}{again}, {after}")
