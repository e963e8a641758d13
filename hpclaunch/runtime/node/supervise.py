"""The node supervisor and its hang watchdog: ``python -m hpclaunch.runtime.node.supervise [OPTIONS] -- CMD...``.

Every node's task runs the launcher (torchrun, msrun, ...) under this supervisor. It

- starts CMD (with ``--ranks NNODES:NPROC``: once per local rank, ``hpclaunch.runtime.node.ranks``) with a tag
  in its environment (``HPCLAUNCH_SUPERVISOR_TAG``), inherited by every process
  CMD starts, even those that start their own session (msrun's workers) or are orphaned;
- passes TERM, INT, HUP, USR1 and USR2 on to CMD; after TERM or INT it gives CMD ``--grace`` seconds,
  then kills every tagged process;
- is the node's one writer of the shared run directory in steady training (``hpclaunch.runtime.node.noderecord``):
  its ranks leave their progress records in node-local memory (HPCLAUNCH_NODE_STATE), and it publishes them in
  the node record at most every few seconds, with its start and end: in a multi-node launch sent to node 0's
  supervisor over TCP, which holds every node's in memory and writes them all in one file,
  RUN_DIR/progress/node-0.restart-<N>.json (``hpclaunch.runtime.node.recordlink``; a node that cannot reach it
  writes its own, node-<K>.restart-<N>.json);
- samples the job's CPU time and memory on the node, and its devices' utilisation and memory
  (``hpclaunch.runtime.node.sampler``: RUN_DIR/usage/node-<N>.restart-<R>.jsonl);
- watches the ranks' progress records (``hpclaunch.runtime.node.progress``): its own ranks' in node-local memory
  at every poll and, when none of them has progressed for the timeout, every rank of the job from the node
  records (at most once per publishing interval): when no rank has progressed for the timeout, it writes the
  verdict (``RUN_DIR/logs/watchdog.restart-<N>.json``: which rank stopped first, at which step and phase, which
  waited), prints it, kills every tagged process and exits with ``HUNG_EXIT_CODE`` (124). The scheduler's
  step then ends the other nodes (Slurm: ``srun --kill-on-bad-exit``), whose supervisors decide the same;
- on node 0, judges from every node's record (those it holds in memory, once per publishing interval) whether a
  node stayed slow, and has it swapped for a spare node
  (``hpclaunch.runtime.node.slowswap``: USR1 to its ranks, which save at the next log step and exit).

The timeout: ``--init-timeout`` until some rank finished its first step, ``--timeout`` after. With
``--adaptive`` (the profile's default timeout, not one the user set) it tightens after ``WARMUP_STEPS``
steps to ``FACTOR`` x the slowest step interval seen, never below ``--min-timeout``, as NVIDIA's
ft_launcher does; never in eval or checkpoint phases, which may legitimately take long.
Standard library only; framework-free, so it works the same on CUDA, MUSA, Ascend and CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch.runtime.node import recordlink
from hpclaunch.runtime.node.noderecord import HISTORY_INTERVAL, NodeWriter
from hpclaunch.runtime.node.progress import WAITING_PHASES
from hpclaunch.runtime.node.ranks import RankGroup, group_size
from hpclaunch.runtime.node.sampler import Sampler, interval_from_env
from hpclaunch.runtime.node.slowswap import SWAP, SlowWatch
from hpclaunch.state.runfiles import ENV_RESTART, RunFiles

HUNG_EXIT_CODE = 124
TAG_VAR = "HPCLAUNCH_SUPERVISOR_TAG"
WARMUP_STEPS = 5
FACTOR = 5.0
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_SLOW_PHASES = frozenset({"init", "eval", "checkpoint"})


Record = dict[str, object]


def _num(rec: Record, key: str) -> float:
    value = rec.get(key)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _step(rec: Record) -> int:
    return int(_num(rec, "step"))


@dataclass
class Watch:
    """The hang decision, fed with the ranks' progress records (testable without processes)."""

    timeout: float
    init_timeout: float
    adaptive: bool = False
    min_timeout: float = 60.0
    started: float = field(default_factory=time.time)
    _steps: dict[int, tuple[int, float]] = field(default_factory=dict)  # rank -> (step, when first seen)
    _slowest: float = 0.0  # the longest interval between two steps of one rank, after warm-up

    def observe(self, records: dict[int, Record]) -> None:
        for rank, rec in records.items():
            step, when = _step(rec), _num(rec, "t")
            last = self._steps.get(rank)
            if last is None or step > last[0]:
                if last is not None and step > WARMUP_STEPS and last[0] >= 1:
                    self._slowest = max(self._slowest, (when - last[1]) / (step - last[0]))
                self._steps[rank] = (step, when)

    def limit(self, records: dict[int, Record]) -> float:
        """The timeout in effect now."""
        if not records or max(_step(r) for r in records.values()) < 1:
            return self.init_timeout
        if self.adaptive and self._slowest > 0 and not any(r.get("phase") in _SLOW_PHASES for r in records.values()):
            return min(self.timeout, max(self.min_timeout, FACTOR * self._slowest))
        return self.timeout

    def stalled_for(self, records: dict[int, Record], now: float) -> float:
        """Seconds since any rank last changed its step or phase (since the start before any record)."""
        live = [_num(r, "t") for r in records.values() if r.get("phase") != "done"]
        if records and not live:
            return 0.0  # every rank is done: shutting down is not a hang
        return now - max([self.started, *live])

    def hung(self, records: dict[int, Record], now: float) -> bool:
        """No rank progressed for the timeout in effect. A job none of whose ranks ever reported (a script
        that does not use hpclaunch's runtime) is never judged: the watchdog cannot see its progress."""
        if not records:
            return False
        self.observe(records)
        return self.stalled_for(records, now) > self.limit(records)


def verdict(records: dict[int, Record]) -> dict[str, object]:
    """Which rank(s) stopped first and which waited: the ranks at the lowest step that are not in a
    phase where ranks wait for their peers; failing that, the rank that changed least recently."""
    if not records:
        return {"hung": [], "waited": [], "ranks": {}, "summary": "no rank reported any progress"}
    low = min(_step(r) for r in records.values())
    behind = sorted(k for k, r in records.items() if _step(r) == low)
    hung = [k for k in behind if records[k].get("phase") not in WAITING_PHASES]
    if not hung:
        oldest = min(_num(r, "t") for r in records.values())
        hung = sorted(k for k, r in records.items() if _num(r, "t") == oldest)
    waited = sorted(k for k in records if k not in hung)
    first = records[hung[0]]
    text = (f"rank{'s' if len(hung) > 1 else ''} {', '.join(map(str, hung))} hung after step "
            f"{first.get('step')} (phase: {first.get('phase')})")
    if waited:
        phases = sorted({str(records[k].get("phase")) for k in waited})
        text += (f"; rank{'s' if len(waited) > 1 else ''} {', '.join(map(str, waited))} waited in a collective "
                 f"(phase: {', '.join(phases)})")
    return {"hung": hung, "waited": waited, "summary": text,
            "ranks": {str(k): {"step": r.get("step"), "phase": r.get("phase"), "t": r.get("t"), "host": r.get("host")}
                      for k, r in sorted(records.items())}}


def tagged(tag: str) -> list[int]:
    needle = f"{TAG_VAR}={tag}".encode()
    pids = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in env.read_bytes().split(b"\0"):
                pids.append(int(env.parent.name))
        except (OSError, ValueError):
            continue
    return [p for p in pids if p != os.getpid()]


def _kill_all(tag: str) -> None:
    for pid in tagged(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def supervise(argv: list[str], **options: Any) -> int:
    """Run `argv` under the watchdog (`_supervise`), with this node's record: its host when it started, its ranks'
    progress while it runs, and when it ended with which code. A node whose record never gets its end was lost
    with everything on it."""
    run = RunFiles.from_env()
    restart = int(os.environ.get(ENV_RESTART, "0") or 0)
    node = os.environ.get("HPCLAUNCH_NODE_RANK", "0")
    writer = NodeWriter(run, node, restart, os.environ.get("HPCLAUNCH_JOB_ID", "manual"),
                        link=recordlink.address(os.environ), nodes=int(os.environ.get("HPCLAUNCH_NNODES", "1") or 1))
    code = 1
    try:
        code = _supervise(argv, run, restart, writer, **options)
    finally:
        writer.close(code)
    return code


def _supervise(argv: list[str], run: RunFiles, restart: int, writer: NodeWriter, *, timeout: float,
               init_timeout: float, adaptive: bool, min_timeout: float, grace: float, poll: float,
               watchdog: bool = True, ranks: tuple[int, int] | None = None) -> int:
    node = str(writer.record["node"])
    tag = f"{os.environ.get('HPCLAUNCH_JOB_ID', 'manual')}.{node}.{os.getpid()}"
    env = {**os.environ, TAG_VAR: tag, **writer.env}
    # --ranks: CMD is one rank's command, started here once per local rank (launch.agent: none)
    child = RankGroup(argv, env, nnodes=ranks[0], nproc=ranks[1]) if ranks else subprocess.Popen(argv, env=env)
    stop_at: list[float] = []

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)
        if signum in (signal.SIGTERM, signal.SIGINT) and not stop_at:
            stop_at.append(time.time() + grace)
            # told to stop: this node was alive at the end (the scheduler may SIGKILL it before it records its end)
            writer.publish(time.time(), signalled=round(time.time(), 3))

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    watch = Watch(timeout, init_timeout, adaptive, min_timeout)
    sampler = Sampler(run.usage_samples(node, restart), node, lambda: sorted({child.pid, *tagged(tag)}),
                      interval_from_env(), flush_interval=HISTORY_INTERVAL)
    job_wide_at = 0.0  # when the node records of the whole job may be read again
    slow = SlowWatch.from_env(run, restart, node)  # node 0 only (None elsewhere)
    slow_at = 0.0  # when node 0 reads them again for the slow-node judge
    while True:
        sampler.poll(time.time())
        try:
            code = child.wait(timeout=poll)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            sampler.sample(ended=True)  # the last: what the ranks used up to their end
            _kill_all(tag)  # anything CMD left behind (msrun workers in their own sessions)
            return _exit_code(code)
        if stop_at and time.time() > stop_at[0]:
            print(f"hpclaunch: node {node}: still running {grace:.0f} s after the stop signal; killing it",
                  file=sys.stderr, flush=True)
            _kill_all(tag)
            continue
        now = time.time()
        local = writer.ranks()
        writer.tick(now, local)
        if slow is not None and slow.decided is None and now >= slow_at:
            slow_at = now + writer.publish_interval
            _judge_slow(slow, {**writer.job_ranks(files=False), **local}, now, child, node)
        # the job is hung only when no rank anywhere progressed: this node's ranks first (memory), then, when they
        # stopped, every node's record (node 0: those it holds and the files of nodes that could not reach it;
        # elsewhere the run directory's; at most once per publishing interval)
        if not watchdog or not watch.hung(local, now) or now < job_wide_at:
            continue
        job_wide_at = now + writer.publish_interval
        records = {**writer.job_ranks(files=True), **local}
        if watch.hung(records, now):
            return _end_hung(run, restart, node, records, watch, now, child, grace, tag)


def _end_hung(run: RunFiles, restart: int, node: str, records: dict[int, Record], watch: Watch, now: float,
              child: Any, grace: float, tag: str) -> int:
    """The watchdog's verdict written and printed, then every process of this node's launch ended: HUNG_EXIT_CODE."""
    found = verdict(records)
    limit = watch.limit(records)
    found.update(node=node, restart=restart, decided_at=now, timeout=limit,
                 stalled_for=round(watch.stalled_for(records, now), 1))
    _write_once(run.watchdog_verdict(restart), found)
    print(f"hpclaunch: watchdog: no rank progressed for {found['stalled_for']:.0f} s (timeout {limit:.0f} s): "
          f"{found['summary']}; ending the job (exit {HUNG_EXIT_CODE})", file=sys.stderr, flush=True)
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=min(grace, 5.0))
    except subprocess.TimeoutExpired:
        pass
    _kill_all(tag)
    child.wait()
    return HUNG_EXIT_CODE


def _judge_slow(slow: SlowWatch, records: dict[int, Record], now: float, child: Any, node: str) -> None:
    """A node found slow: its swap asked (USR1 to this node's ranks: every rank saves at the next log step and
    exits), or only reported."""
    found = slow.check(records, now)
    if found is None:
        return
    print(f"hpclaunch: node {node}: {found['text']}", file=sys.stderr, flush=True)
    if found["action"] == SWAP and child.poll() is None:
        child.send_signal(signal.SIGUSR1)


def _write_once(path: Path, data: dict[str, object]) -> None:
    """The first node to decide writes the verdict; the others keep it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.supervise", description=__doc__.split("\n")[0])
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds without progress after the first step")
    p.add_argument("--init-timeout", type=float, default=3600.0, help="seconds allowed before the first step")
    p.add_argument("--adaptive", action="store_true", help="tighten to a multiple of the observed step time")
    p.add_argument("--no-watchdog", action="store_true", help="supervise (signals, cleanup) without the watchdog")
    p.add_argument("--min-timeout", type=float, default=60.0, help="the adaptive timeout's floor")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between the stop signal and the kill")
    p.add_argument("--poll", type=float, default=0.0, help="seconds between checks (default: from the timeout)")
    p.add_argument("--ranks", type=group_size, metavar="NNODES:NPROC",
                   help="start CMD once per local rank, as torchrun would (no agent): NNODES nodes x NPROC ranks")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command to supervise (put it after --)")
    poll = args.poll or max(1.0, min(5.0, args.timeout / 12))
    return supervise(command, timeout=args.timeout, init_timeout=args.init_timeout, adaptive=args.adaptive,
                     min_timeout=args.min_timeout, grace=args.grace, poll=poll, watchdog=not args.no_watchdog,
                     ranks=args.ranks)


if __name__ == "__main__":
    sys.exit(main())
