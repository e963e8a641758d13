"""A run's goodput ledger: how much of the allocated node time advanced the model, and where the rest went.

    goodput = productive seconds x nodes that train / (allocated wall seconds x nodes allocated)

- **allocated**: per Slurm job of the run (a `--retries` resubmission or a `resume` is a job of its own; restarts
  inside one allocation are not), from its job script's start to its last end; x the nodes it holds (spares
  included: they idle while they wait to replace a node);
- **productive**: the training spans (first step to the launch's end, each restart) less the time checkpoints
  blocked training, less the time the ranks made no progress before a launch that did not finish ended (a hang
  until the watchdog, a stall: from the last phase change of any rank, its progress records, to the launch's end)
  and less the work done again after a fault (the steps between the step a restart resumed from, a peer's
  snapshot or a checkpoint, and where the run before it had got to, at the run's mean step time while it
  progressed);
- the rest, in wall seconds: `startup` (job script to the first step, the first step excluded, each restart),
  `health` (the node health checks), `checkpoint_blocked`, `hung`, `recomputed`, `recovery` (between the end of one
  launch and the start of the next in the same allocation), `other` (what no stamp accounts for); and in node
  seconds `spares_idle`. Time in the queue is outside any allocation: `queued_s` (the first job) and
  `queued_retries_s` (every later one) are listed beside the ledger, not in it.

Read from the run directory's own records: timeline.jsonl (state.timeline), checkpoints.jsonl, each restart's
last step in progress/ (any rank's furthest) and the step it resumed from (progress/resumed.restart-<N>.json).
Standard library only; `report` and `status --json` show it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hpclaunch.report.checkpoints import load as load_checkpoints
from hpclaunch.state import recoveries, timeline
from hpclaunch.state.runfiles import RunFiles

# the timeline spans of the start-up, the first step (it trains) and the health checks (their own line) excluded
_STARTUP_SPANS = tuple(timeline.SPANS[p] for p in timeline.STARTUP if p not in ("first_step", "health_checked"))
_WORDS = {"startup": "start-up", "health": "health checks", "checkpoint_blocked": "checkpoints blocking",
          "hung": "no progress (hang)", "recomputed": "work done again", "recovery": "recovery"}
HEALTH_SPAN = timeline.SPANS["health_checked"]  # the node health checks before the launch


def _span(entry: Mapping[str, Any]) -> tuple[float, float] | None:
    """When a restart's part of the job ran: from its first stamp after `submitted` to `finished` (or its last)."""
    t = [v for p, v in entry["phases"].items() if p != "submitted"]
    return (min(t), max(t)) if t else None


def _allocated(restarts: Sequence[Mapping[str, Any]]) -> tuple[float, float, float]:
    """(wall seconds allocated over every job, seconds the first job queued, seconds later jobs queued)."""
    jobs: dict[str, list[float]] = {}
    queued, queued_later, first_job = 0.0, 0.0, None
    for entry in restarts:
        span = _span(entry)
        job = str(entry.get("job") or f"restart-{entry['restart']}")
        if span is not None:
            lo, hi = jobs.setdefault(job, [span[0], span[1]])
            jobs[job] = [min(lo, span[0]), max(hi, span[1])]
        q = float(entry.get("queued_s") or 0.0) if "submitted" in entry["phases"] else 0.0
        if first_job is None or job == first_job:
            first_job = job
            queued += q
        else:
            queued_later += q
    return sum(hi - lo for lo, hi in jobs.values()), queued, queued_later


def _resumed_at(restart: int, reached: int, checkpoints: Sequence[Mapping[str, Any]]) -> int:
    """The step a restart began from: the newest checkpoint saved before it, at or below where it had got to."""
    saved = [int(c["step"]) for c in checkpoints if int(c.get("restart", 0)) < restart and int(c["step"]) <= reached]
    return max(saved, default=0)


def _steps(last_step: Mapping[int, int], checkpoints: Sequence[Mapping[str, Any]],
           resumed: Mapping[int, int] | None = None) -> tuple[int, int]:
    """(steps run in all, steps run again): a restart after the first ran from the step it resumed (its ranks'
    record, `resumed`: a peer's snapshot or a checkpoint; else the newest checkpoint saved before it) to its last
    step; the steps from there to where the restart before it had got to were trained twice."""
    ran, again, reached = 0, 0, None
    for restart in sorted(last_step):
        if reached is None:
            start = 0
        elif resumed and restart in resumed:
            start = resumed[restart]
        else:
            start = _resumed_at(restart, reached, checkpoints)
        if reached is not None:
            again += max(0, reached - start)
        ran += max(0, last_step[restart] - start)
        reached = last_step[restart]
    return ran, again


def ledger(restarts: Sequence[Mapping[str, Any]], checkpoints: Sequence[Mapping[str, Any]],
           last_step: Mapping[int, int], *, nodes: int, spare_nodes: int = 0,
           hung: Mapping[int, float] | None = None, resumed: Mapping[int, int] | None = None
           ) -> dict[str, Any] | None:
    """The ledger of a run (see the module's docstring); None before any part of it ran. `hung`: restart ->
    seconds its ranks made no progress before its launch ended (`hung_s`); `resumed`: restart -> the step its
    ranks resumed from, where they said (`resumed_steps`)."""
    allocated, queued, queued_later = _allocated(restarts)
    if allocated <= 0:
        return None
    durations = [e["durations"] for e in restarts]
    training = sum(d.get("first_step", 0.0) + d.get("training", 0.0) for d in durations)
    startup = sum(_startup(e) for e in restarts)
    health = sum(d.get(HEALTH_SPAN, 0.0) for d in durations)
    blocked = sum(float(c.get("blocked_s") or 0.0) for c in checkpoints)
    stuck = min(sum((hung or {}).values()), max(0.0, training - blocked))
    moving = training - stuck  # the training time while steps advanced: a hang says nothing of a step's time
    ran, again = _steps(last_step, checkpoints, resumed)
    recomputed = min(moving - blocked, again * moving / ran) if moving > blocked and ran else 0.0
    productive = max(0.0, moving - blocked - recomputed)
    recovery = _recovery(restarts)
    other = max(0.0, allocated - training - startup - health - recovery)
    goodput = productive * nodes / (allocated * (nodes + spare_nodes))
    return {"goodput": round(goodput, 4), "allocated_s": round(allocated, 3), "nodes": nodes,
            "spare_nodes": spare_nodes, "productive_s": round(productive, 3),
            "lost_s": {"startup": round(startup, 3), "health": round(health, 3),
                       "checkpoint_blocked": round(blocked, 3), "hung": round(stuck, 3),
                       "recomputed": round(recomputed, 3),
                       "recovery": round(recovery, 3), "other": round(other, 3)},
            "spares_idle_node_s": round(allocated * spare_nodes, 3), "recomputed_steps": again,
            "queued_s": round(queued, 3), "queued_retries_s": round(queued_later, 3)}


def _startup(entry: Mapping[str, Any]) -> float:
    """The start-up spans of one restart; a restart relaunched inside its job (no `submitted`, no `started`)
    has its first span measured from the launch before it ended: that gap is recovery, not start-up."""
    d, phases = entry["durations"], entry["phases"]
    total = sum(d.get(s, 0.0) for s in _STARTUP_SPANS)
    first = next((p for p in timeline.PHASES[1:] if p in phases), None)
    if "submitted" not in phases and first not in (None, "started") and timeline.SPANS[first] in _STARTUP_SPANS:
        total -= d.get(timeline.SPANS[first], 0.0)
    return total


def after_startup(led: Mapping[str, Any], restarts: Sequence[Mapping[str, Any]]) -> float:
    """The ledger's goodput with the first launch's start-up and health checks left out of the allocation, as the
    goodput submit promises counts it (hpclaunch/plan/promise.py); later start-ups (relaunches, resubmissions)
    stay in."""
    first = _startup(restarts[0]) + restarts[0]["durations"].get(HEALTH_SPAN, 0.0) if restarts else 0.0
    rest = led["allocated_s"] - first
    if rest <= 0:
        return 0.0
    return round(led["productive_s"] * led["nodes"] / (rest * (led["nodes"] + led["spare_nodes"])), 4)


def _recovery(restarts: Sequence[Mapping[str, Any]]) -> float:
    """Seconds between the end of one launch and the start of the next inside the same job."""
    gaps = 0.0
    for before, after in zip(restarts, restarts[1:], strict=False):
        end, start = before["phases"].get("finished"), _span(after)
        if end is not None and start is not None and before.get("job") == after.get("job"):
            gaps += max(0.0, start[0] - end)
    return gaps


def last_steps(files: RunFiles) -> dict[int, int]:
    """The furthest step of each restart, any rank's, from the progress records (rank 0's node may have been lost
    before its supervisor published its last steps)."""
    out: dict[int, int] = {}
    for restart in files.progress_restarts():
        if (step := recoveries.reached(files, restart)) is not None:
            out[restart] = step
    return out


def resumed_steps(files: RunFiles) -> dict[int, int]:
    """restart -> the step its ranks resumed from (a peer's snapshot or a checkpoint), where rank 0 recorded it."""
    out: dict[int, int] = {}
    for restart in files.progress_restarts():
        if (rec := recoveries.resumed(files, restart)) is not None:
            out[restart] = int(rec["step"])
    return out


def hung_s(files: RunFiles, restarts: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """restart -> seconds from the last progress of any of its ranks (a phase change, progress records) to the end
    of its launch, for a launch that did not finish (no rank reached `done`): a hang the watchdog ended, a stall
    a node fault or a cancel ended. A launch that finished has none."""
    out: dict[int, float] = {}
    for entry in restarts:
        end = entry["phases"].get("finished")
        records = files.progress_records(int(entry["restart"])) if end is not None else {}
        moved = [float(t) for r in records.values() if isinstance(t := r.get("t"), (int, float)) and t > 0]
        if moved and not any(r.get("phase") == "done" for r in records.values()):
            out[int(entry["restart"])] = max(0.0, float(end) - max(moved))
    return out


def nodes_of(layout: str) -> int:
    """The nodes of a layout (`2n8g` -> 2); 1 for anything else (an own script's record)."""
    head = layout.split("n", 1)[0]
    return int(head) if head.isdigit() and int(head) > 0 else 1


def of_run(files: RunFiles, *, nodes: int, spare_nodes: int = 0,
           restarts: Sequence[Mapping[str, Any]] | None = None,
           saved: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
    """The ledger of the run directory `files`; `restarts` (its timeline) and `saved` (its checkpoints), where the
    caller loaded them already."""
    restarts = timeline.load(files) if restarts is None else restarts
    saved = load_checkpoints(files) if saved is None else saved
    return ledger(restarts, saved, last_steps(files), nodes=nodes, spare_nodes=spare_nodes,
                  hung=hung_s(files, restarts), resumed=resumed_steps(files))


def describe(led: Mapping[str, Any]) -> str:
    """``goodput 87.1 % of 2 node(s) x 10m05s: start-up 41s, checkpoints blocking 3.2s, work done again 12s, ...``"""
    lost = ", ".join(f"{_WORDS.get(name, name)} {timeline.seconds(s)}" for name, s in led["lost_s"].items() if s)
    spares = f" (+{led['spare_nodes']} spare)" if led["spare_nodes"] else ""
    queue = f"; queued {timeline.seconds(led['queued_s'])}" if led["queued_s"] else ""
    if led["queued_retries_s"]:
        queue += f", again {timeline.seconds(led['queued_retries_s'])} for later jobs"
    return (f"goodput {100 * led['goodput']:.1f} % of {led['nodes']} node(s){spares} x "
            f"{timeline.seconds(led['allocated_s'])}" + (f": {lost}" if lost else "") + queue)
