"""Stragglers: ranks whose step time stays above `factor` x the median rank's, from the per-rank progress records
(hpclaunch/runtime/node/progress.py, published in RUN_DIR/progress/node-<K>.restart-<N>.json by each node's
supervisor), read by `status`, `watch` and `report`.

In data-parallel training every rank's wall time per step is the same: the fast ranks wait for the slow one in
the step's collectives. Each record therefore carries, over the rank's last window of finished steps, the wall
seconds and the seconds spent waiting for its peers (``win``: [steps, seconds, waiting]). The rank that waited
least is the one the others waited for; a rank's own step time is its wall time less what it waited beyond that
least wait:

    own(r) = seconds(r)/steps(r) - (waiting(r)/steps(r) - min over ranks of waiting/steps)

A rank whose own step time is more than `factor` x the median rank's over the window, and more than it by at least
MIN_SHARE of the median wall time per step, is named, with its host. (The second condition keeps noise out: where
every rank waits nearly the whole step, own times are milliseconds, and 2 ms against 1 ms is no straggler.)
Time a rank spends computing in the forward and backward pass is counted as waiting (the gradient all-reduce
runs inside it): a rank slow in its data loading or host work is seen, one whose device computes slowly is not.
Standard library only.
"""

from __future__ import annotations

import statistics
from typing import Any

from hpclaunch.state.runfiles import RunFiles

DEFAULT_FACTOR = 1.2
MIN_STEPS = 3  # a window shorter than this (the first steps) says nothing yet
MIN_SHARE = 0.05  # a straggler's own step time exceeds the median's by at least this share of a step's wall time


def _records(run: RunFiles) -> list[dict[str, Any]]:
    """The records of the newest restart that has any."""
    for restart in reversed(run.progress_restarts()):
        found = run.progress_records(restart)
        if found:
            return [{**rec, "restart": restart} for rec in found.values()]
    return []


def _window(rec: dict[str, Any]) -> tuple[int, float, float] | None:
    win = rec.get("win")
    if not (isinstance(win, list) and len(win) == 3 and all(isinstance(v, (int, float)) for v in win)):
        return None
    steps, seconds, waiting = int(win[0]), float(win[1]), float(win[2])
    return (steps, seconds, waiting) if steps >= MIN_STEPS and seconds > 0 else None


def find(run: RunFiles, factor: float | None = None) -> list[dict[str, Any]]:
    """The stragglers of the newest restart, slowest first: rank, host, restart, step, steps (the window),
    step_s (its own step time), median_s, ratio; [] with fewer than two ranks to compare. `factor`: by default the
    job's stragglers.factor, as its ranks wrote it into their records (``sf``), else DEFAULT_FACTOR."""
    windows = {}
    records = {}
    for rec in _records(run):
        w = _window(rec)
        if w is not None:
            windows[rec["rank"]], records[rec["rank"]] = w, rec
    if len(windows) < 2:
        return []
    if factor is None:
        written = [r["sf"] for r in records.values() if isinstance(r.get("sf"), (int, float)) and r["sf"] > 1]
        factor = float(written[0]) if written else DEFAULT_FACTOR
    slow, median = slower(windows, factor)
    out = [{"rank": rank, "host": records[rank].get("host"), "restart": records[rank]["restart"],
            "step": records[rank].get("step"), "steps": windows[rank][0], "step_s": round(s, 4),
            "median_s": round(median, 4), "ratio": round(s / median, 2)} for rank, s in slow.items()]
    return sorted(out, key=lambda r: -r["step_s"])


def slower(windows: dict[int, tuple[int, float, float]], factor: float) -> tuple[dict[int, float], float]:
    """The ranks slower than `factor` x the median over one window each (rank -> (steps, seconds, waiting)):
    ({rank: its own step time}, the median own step time), by the rule above; ({}, 0.0) with fewer than two."""
    if len(windows) < 2:
        return {}, 0.0
    least_wait = min(waiting / steps for steps, _, waiting in windows.values())
    own = {rank: seconds / steps - (waiting / steps - least_wait)
           for rank, (steps, seconds, waiting) in windows.items()}
    median = statistics.median(own.values())
    floor = MIN_SHARE * statistics.median(seconds / steps for steps, seconds, _ in windows.values())
    if median <= 0:
        return {}, median
    return {rank: s for rank, s in own.items() if s > factor * median and s - median > floor}, median


STALL_FACTOR = 5.0  # a rank whose phase has not changed for this many median steps has stalled ...
STALL_MIN_S = 30.0  # ... and for at least this long (a checkpoint save or an evaluation takes a while)
QUIET_PHASES = {"done", "init", "checkpoint", "eval"}  # a rank in these is not judged (ended, or busy on purpose)
WAITING = {"collective", "forward", "backward"}  # phases a rank waits in for its peers (progress.WAITING_PHASES)


def stalled(run: RunFiles, now: float) -> list[dict[str, Any]]:
    """The ranks of a running job whose progress has stopped, before the hang watchdog ends them: a rank whose
    phase has not changed for STALL_FACTOR x the median step's wall time (over the ranks' windows) and at least
    STALL_MIN_S: rank, host, restart, step, phase, stalled_s, median_step_s; longest first. [] before the ranks
    have a window of steps (the first steps, the imports and the warm-up are not judged)."""
    records = _records(run)
    steps = [seconds / n for n, seconds, _ in filter(None, map(_window, records))]
    if not steps:
        return []
    median = statistics.median(steps)
    limit = max(STALL_FACTOR * median, STALL_MIN_S)
    out = [{"rank": rec["rank"], "host": rec.get("host"), "restart": rec["restart"], "step": rec.get("step"),
            "phase": rec.get("phase"), "stalled_s": round(now - float(rec["t"]), 1), "median_step_s": round(median, 3)}
           for rec in records if isinstance(rec.get("t"), (int, float)) and rec.get("phase") not in QUIET_PHASES
           and now - float(rec["t"]) > limit]
    # the rank stuck outside a collective first: the others wait for it there
    return sorted(out, key=lambda r: (r["phase"] in WAITING, -r["stalled_s"]))


def describe_stall(found: dict[str, Any]) -> str:
    """rank 1 on node2: no progress for 64 s in data at step 12 (the median step takes 0.31 s)"""
    return (f"rank {found['rank']} on {found['host'] or '?'}: no progress for {found['stalled_s']:.0f} s in "
            f"{found['phase']} at step {found['step']} (the median step takes {found['median_step_s']:.3g} s)")


def describe(found: dict[str, Any]) -> str:
    """rank 1 on node2: 0.52 s/step, 3.1x the median 0.17 s (last 10 steps)"""
    return (f"rank {found['rank']} on {found['host'] or '?'}: {found['step_s']:.3g} s/step, {found['ratio']}x the "
            f"median {found['median_s']:.3g} s (last {found['steps']} steps)")
