"""After a failed launch: was it the node's fault, and which node? ``python -m hpclaunch.runtime.node.blame``.

The job script asks this when the job may be relaunched (``restarts.max``) or retried (``submit --retries N``).
A failure is node-level when a node was lost (its supervisor's record has no end: every process on it died at
once, while the other nodes' supervisors saw their launch end), the watchdog ended a hang (the hung rank's node),
a rank was killed by SIGKILL (the OOM killer: its node), or the diagnosis names a node or device fault (node
failure, device error, network/IB error) on a rank whose node is known from its progress record. Anything else
(an exception in the script, a bad config) would fail again anywhere: no retry. A launch that ended 0 is blamed
only when node 0's supervisor stopped it to swap a slow node (``hpclaunch.runtime.node.slowswap``: cause ``slow``).

A collective timeout (NCCL's watchdog, HCCL EI0002/EI0006) on its own proves no node fault: the ranks
that report it only waited. It names suspects, though: the ranks that did not report it. A node is
blamed only when it went quiet as a whole: none of its ranks reported the timeout while every rank on
the other nodes did. Anything else is not blamed: every rank reported it (a network-wide stall, or a
hang in the script that would happen anywhere), suspects on several nodes, or a node where one rank
reported it first and the launcher ended its neighbours before they could.

It prints the suspect nodes (comma-separated) on the first line and the reason as a JSON string on the
second, or nothing; and remembers the suspects in ``$HPCLAUNCH_HOME/suspect-nodes.json`` for
``suspect_node_hours`` (later submissions exclude them). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from hpclaunch.runtime.node.progress import read_all
from hpclaunch.runtime.node.slowswap import swap_asked
from hpclaunch.runtime.node.supervise import HUNG_EXIT_CODE
from hpclaunch.state import suspects
from hpclaunch.state.runfiles import ENV_RESTART, RunFiles

# diagnose rules whose cause lies in the node (hardware, its network, its memory), not in the job
NODE_LEVEL_RULES = frozenset({"node_fail", "host_oom", "device_fault", "network_fault", "network_interface"})


# causes after which the node itself is not used again (a spare takes its place); after the others (a hang, a
# rank killed) the processes failed while the node answered: a relaunch may use it again
NODE_GONE = frozenset({"node_lost", "slow", *NODE_LEVEL_RULES})


@dataclass(frozen=True)
class Blame:
    nodes: tuple[str, ...]
    reason: str
    cause: str = ""  # node_lost, hang, killed, slow, or the diagnose rule (NODE_LEVEL_RULES)
    rank: int | None = None


def _node_records(run: RunFiles, restart: int) -> list[dict[str, Any]]:
    """Every node's last record (node 0's file holds the others' in a multi-node launch; each node's newest)."""
    return run.node_record_data(restart)


def lost_nodes(run: RunFiles, restart: int) -> list[str]:
    """The hosts whose node supervisor started this restart and recorded neither its end nor a stop signal, when
    others did (or the job has one node): they were lost with every process on them. (A supervisor told to stop
    records that at once: the scheduler may SIGKILL it before it records its end.)"""
    records = _node_records(run, restart)
    gone = sorted({str(r.get("host")) for r in records
                   if "ended" not in r and "signalled" not in r and r.get("host")})
    return gone if gone and (len(gone) < len(records) or len(records) == 1) else []


def _ranks_of(run: RunFiles, restart: int, hosts: list[str]) -> list[int]:
    """The ranks a node held when it was lost before its supervisor published them (its first seconds): a fixed
    world places ranks node by node, so node K held K x R to K x R + R - 1, R the ranks per node that the other
    nodes' records show."""
    records = _node_records(run, restart)
    per_node = max((len(r.get("ranks") or {}) for r in records), default=0)
    out: list[int] = []
    for rec in records:
        if rec.get("host") in hosts and not rec.get("ranks") and per_node and str(rec.get("node", "")).isdigit():
            out += range(int(rec["node"]) * per_node, int(rec["node"]) * per_node + per_node)
    return sorted(out)


def blame(run: RunFiles, restart: int, exit_code: int, job_id: str = "") -> Blame | None:
    if exit_code == 0:  # the ranks stopped for a slow node's swap, or they finished
        slow = swap_asked(run, restart)
        return Blame((str(slow["host"]),), str(slow["summary"]), "slow", slow.get("rank")) if slow else None
    hosts = {rank: str(rec.get("host")) for rank, rec in read_all(run, restart).items() if rec.get("host")}
    lost = lost_nodes(run, restart)
    if exit_code != 0 and lost:
        ranks = sorted(r for r, h in hosts.items() if h in lost) or _ranks_of(run, restart, lost)
        return Blame(tuple(lost), f"node {', '.join(lost)} lost: every process on it ended at once "
                     "(its supervisor too)", "node_lost", ranks[0] if ranks else None)
    verdict_file = run.watchdog_verdict(restart)
    if exit_code == HUNG_EXIT_CODE and verdict_file.is_file():
        verdict = json.loads(verdict_file.read_text())
        ranks = [int(r) for r in verdict.get("hung", [])]
        nodes = sorted({hosts[r] for r in ranks if r in hosts})
        if nodes:
            return Blame(tuple(nodes), f"hang: {verdict.get('summary', '')}", "hang", ranks[0])
    killed = []
    for path in run.rank_exits(restart):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if rec.get("code") in (-9, 137) and rec.get("host"):
            killed.append((int(rec["rank"]), str(rec["host"])))
    if killed:
        nodes = sorted({h for _, h in killed})
        which = ", ".join(str(r) for r, _ in sorted(killed))
        return Blame(tuple(nodes), f"rank {which} killed by SIGKILL (the OOM killer?) on {', '.join(nodes)}",
                     "killed", min(r for r, _ in killed))
    try:
        from hpclaunch.logs.diagnose import diagnose
    except ImportError:  # a job environment without hpclaunch's logs package: no further evidence
        return None
    d = diagnose(run.root, job_id)
    if d.cause == "collective_timeout":
        return _timeout_suspect(d.title, d.rank, d.suspect_ranks, hosts)
    if d.cause not in NODE_LEVEL_RULES:
        return None
    node = d.node or (hosts.get(d.rank) if d.rank is not None else None)
    if not node:
        return None
    return Blame((node,), f"{d.title} on {node}" + (f" (rank {d.rank})" if d.rank is not None else ""), d.cause,
                 d.rank)


def _timeout_suspect(title: str, rank: int | None, suspects: list[int], hosts: dict[int, str]) -> Blame | None:
    """The one node none of whose ranks reported a collective timeout that every rank elsewhere reported."""
    if not suspects or any(r not in hosts for r in suspects):
        return None
    nodes = {hosts[r] for r in suspects}
    if len(nodes) != 1:
        return None
    node = next(iter(nodes))
    on_node = {r for r, host in hosts.items() if host == node}
    if on_node != set(suspects) or len(on_node) == len(hosts):  # a rank there reported it, or no other node
        return None
    which = ", ".join(map(str, suspects))
    return Blame((node,), f"{title} on rank {rank}; rank(s) {which} on {node} did not report it (they stopped first)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.blame", description=__doc__.split("\n")[0])
    p.add_argument("--exit-code", type=int, required=True, help="the launch's exit code")
    p.add_argument("--hours", type=float, default=24.0, help="how long the suspects are excluded")
    args = p.parse_args(argv)
    run = RunFiles.from_env()
    restart = int(os.environ.get(ENV_RESTART, "0") or 0)
    job_id = os.environ.get("HPCLAUNCH_JOB_ID", "")
    found = blame(run, restart, args.exit_code, job_id)
    if found is None:
        return 0
    try:
        if (why := suspects.not_remembered()) is None:
            suspects.remember(found.nodes, found.reason, job_id, hours=args.hours)
        else:
            print(f"hpclaunch: {','.join(found.nodes)} not remembered as suspect: {why}", file=sys.stderr)
    except OSError as exc:  # an unwritable home must not stop the retry
        print(f"hpclaunch: could not remember suspect nodes: {exc}", file=sys.stderr)
    print(",".join(found.nodes))
    print(json.dumps(found.reason))
    return 0


if __name__ == "__main__":
    sys.exit(main())
