"""After a failed launch: relaunch it inside the same allocation? ``python -m hpclaunch.runtime.node.relaunch``.

The job script asks this when the launch ended non-zero and the job may relaunch (``restarts.max`` > 0). A
cause that a restart can fix (``hpclaunch.runtime.node.blame``: a node lost, a hang ended by the watchdog, a
rank killed by SIGKILL, a device or network fault on a known node) relaunches the step from the newest
checkpoint, up to ``restarts.max`` times; an error in the script (an exception) ends the job.

Which nodes: after a hang or a killed rank the same ones (the processes failed, the node still answered);
after a lost node, a device/network fault or a slow node's swap (the launch ended 0: node 0's supervisor stopped
the ranks at a checkpoint for it, ``hpclaunch.runtime.node.slowswap``) the node is dropped for the rest of the
allocation and the first
healthy nodes of the allocation take the launch at the same world size (a spare node, ``submit
--spare-nodes K``, takes its place). With no spare left the job ends here and ``submit --retries`` (when
given) resubmits it without the node; the data-parallel size is never shrunk.

It prints shell assignments for the job script to ``eval`` (``hpclaunch_action=relaunch|end``, the nodes,
the dropped nodes, the next restart number, the cause, the reason) and, for a relaunch, appends the recovery to
``RUN_DIR/recoveries.jsonl``. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass

from hpclaunch.runtime.node.blame import NODE_GONE, Blame, blame
from hpclaunch.state import suspects
from hpclaunch.state.runfiles import ENV_RESTART, RunFiles


@dataclass(frozen=True)
class Decision:
    action: str  # "relaunch" or "end"
    nodes: tuple[str, ...]  # the nodes of the next launch (relaunch), in allocation order
    dropped: tuple[str, ...]  # every node dropped in this allocation so far
    reason: str


def decide(found: Blame | None, *, used: tuple[str, ...], allocation: tuple[str, ...], dropped: tuple[str, ...],
           relaunches: int, max_restarts: int) -> Decision:
    """The relaunch decision (pure): `used` ran the launch that failed, `allocation` is every node of the job
    (spares included) in order, `dropped` those already given up in it."""
    if found is None:
        return Decision("end", used, dropped, "not a cause a restart can fix (an error in the script, or no "
                        "evidence of a node, device or hang): the job ends")
    if relaunches >= max_restarts:
        return Decision("end", used, dropped, f"{found.reason}; restarts.max={max_restarts} relaunches used up")
    if found.cause not in NODE_GONE:
        return Decision("relaunch", used, dropped, found.reason)
    gone = tuple(dict.fromkeys([*dropped, *found.nodes]))
    healthy = [n for n in allocation if n not in gone]
    if len(healthy) < len(used):
        spares = len(allocation) - len(used)
        return Decision("end", used, gone, f"{found.reason}; no spare node left to take its place "
                        f"({spares} spare node(s) in this allocation, {len(gone)} dropped; submit --spare-nodes K)")
    return Decision("relaunch", tuple(healthy[:len(used)]), gone, found.reason)


def _detected_at(run: RunFiles, restart: int, found: Blame) -> float:
    """When the fault was detected: the watchdog's or the slow-node judge's decision, else now (the launch just
    ended)."""
    if found.cause in ("hang", "slow"):
        verdict = run.watchdog_verdict(restart) if found.cause == "hang" else run.slow_verdict(restart)
        try:
            return float(json.loads(verdict.read_text())["decided_at"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return time.time()


def record(run: RunFiles, restart: int, found: Blame, decision: Decision, job_id: str) -> dict[str, object]:
    """The recovery's line in recoveries.jsonl (seconds_to_first_step is read later, from the timeline)."""
    latest = run.latest_checkpoint()
    reason = found.reason
    if found.cause == "slow":  # node3 slow for 5 windows (1.6x the median): swapped at step 400 for node5
        spares = [n for n in decision.nodes if n not in found.nodes and n not in _nodes(os.environ.get(
            "HPCLAUNCH_NODELIST", ""))]
        reason += f": swapped at step {latest[0] if latest else 0} for {','.join(spares) or '?'}"
    entry: dict[str, object] = {
        "job": job_id, "cause": found.cause, "rank": found.rank, "node": ",".join(found.nodes),
        "reason": reason, "restart": restart, "resumed_restart": restart + 1,
        "detected_at": round(_detected_at(run, restart, found), 3),
        "resumed_step": latest[0] if latest else 0, "nodes": ",".join(decision.nodes),
        "dropped": ",".join(decision.dropped)}
    with run.recoveries.open("a") as out:
        out.write(json.dumps(entry) + "\n")
    return entry


def _nodes(text: str) -> tuple[str, ...]:
    return tuple(n for n in text.split(",") if n)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.relaunch", description=__doc__.split("\n")[0])
    p.add_argument("--exit-code", type=int, required=True, help="the launch's exit code")
    p.add_argument("--relaunches", type=int, default=0, help="relaunches already made in this allocation")
    p.add_argument("--max", type=int, required=True, help="restarts.max")
    p.add_argument("--dropped", default="", help="nodes already dropped in this allocation (comma-separated)")
    p.add_argument("--hours", type=float, default=24.0, help="how long blamed nodes stay suspects")
    args = p.parse_args(argv)
    run = RunFiles.from_env()
    restart = int(os.environ.get(ENV_RESTART, "0") or 0)
    job_id = os.environ.get("HPCLAUNCH_JOB_ID", "")
    used = _nodes(os.environ.get("HPCLAUNCH_NODELIST", ""))
    found = blame(run, restart, args.exit_code, job_id)
    d = decide(found, used=used, allocation=_nodes(os.environ.get("HPCLAUNCH_ALLOCATION", "")) or used,
               dropped=_nodes(args.dropped), relaunches=args.relaunches, max_restarts=args.max)
    if found is not None:
        try:
            if (why := suspects.not_remembered()) is None:
                suspects.remember(found.nodes, found.reason, job_id, hours=args.hours)
            else:
                print(f"hpclaunch: {','.join(found.nodes)} not remembered as suspect: {why}", file=sys.stderr)
        except OSError as exc:  # an unwritable home must not stop the recovery
            print(f"hpclaunch: could not remember suspect nodes: {exc}", file=sys.stderr)
    if d.action == "relaunch" and found is not None:
        record(run, restart, found, d, job_id)
        run.last_restart.write_text(f"{restart + 1}\n")
    if found is None and args.exit_code == 0:
        d = Decision("end", used, d.dropped, "the ranks finished before the slow node's swap: nothing to relaunch")
    for name, value in (("action", d.action), ("nodes", ",".join(d.nodes)), ("dropped", ",".join(d.dropped)),
                        ("restart", str(restart + 1)), ("cause", found.cause if found else ""),
                        ("reason", d.reason)):
        print(f"hpclaunch_{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
