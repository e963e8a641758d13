"""Fault injection, to rehearse a cluster's failure handling: ``HPCLAUNCH_INJECT=KIND:RANK:STEP[,...]``.

Set it in the environment of ``hpclaunch submit``; the job script exports it to every rank, on every
scheduler. Rank RANK, after finishing optimizer step STEP, then

    hang      sleeps forever (in the data phase), as a rank stuck in I/O or a dead device would
    crash     raises an exception (the rank exits 1 with a traceback): a bug, never restarted
    kill      sends itself SIGKILL (exit -9, as the OOM killer does)
    nodefail  SIGKILLs every process of the job on its node at once, the node supervisor and the
              scheduler's task included, as when the node is lost
    sick      (RANK is a node of the allocation, spares included, STEP 0) fails that node's health check
              before step 0 (hpclaunch/runtime/node/health.py), as a node with a bad device would
    slow      becomes a straggler: every later step takes 5x as long (the extra time outside the collectives,
              in the data phase, as a rank reading from a slow disk: the others wait for it in theirs)

A comma-separated list rehearses several faults in one run (``kill:1:20,hang:1:60,nodefail:0:100``): each
fires once across the job's restarts, relaunches and retries; the ones that fired are remembered in
``RUN_DIR/progress/injected.jsonl``. Standard library only; see docs/troubleshooting.md.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

from hpclaunch.config.faults import BEFORE_START, ENV, Fault, parse_list
from hpclaunch.runtime.node.supervise import TAG_VAR, tagged
from hpclaunch.state.runfiles import ENV_RESTART, ENV_RUN_DIR, RunFiles

SLOW_FACTOR = 5.0
_SUPERVISOR = b"hpclaunch.runtime.node.supervise"


class InjectedCrashError(RuntimeError):
    """The exception `crash` raises."""


def fired(path: Path | None) -> set[str]:
    """The faults (``kill:1:20``) that fired already in this run directory."""
    if path is None or not path.is_file():
        return set()
    done = set()
    for line in path.read_text().splitlines():
        try:
            done.add(str(json.loads(line)["fault"]))
        except (ValueError, KeyError, TypeError):
            continue
    return done


class Injector:
    """Called by the training loop once per optimizer step with the step just finished and its duration."""

    def __init__(self, faults: Fault | tuple[Fault, ...] | None, rank: int, record: Path | None = None) -> None:
        given = (faults,) if isinstance(faults, Fault) else (faults or ())
        done = fired(record)
        self.faults = [f for f in given if f.rank == rank and str(f) not in done and f.kind not in BEFORE_START]
        self.rank, self.record = rank, record
        self.slow = False

    @classmethod
    def from_env(cls, rank: int) -> Injector:
        text = os.environ.get(ENV, "")
        record = RunFiles.from_env().injected if os.environ.get(ENV_RUN_DIR) else None
        return cls(parse_list(text) if text else None, rank, record)

    def after_step(self, step: int, seconds: float) -> None:
        for f in [f for f in self.faults if f.step == step]:
            self.faults.remove(f)
            self._remember(f)
            print(f"hpclaunch: fault injection: {f.kind} on rank {self.rank} after step {step}", flush=True)
            _FIRE[f.kind](self, step)
        if self.slow:  # the extra time in the data phase, outside the collectives: the others wait in theirs
            from hpclaunch.runtime.node import progress

            progress.enter("data", step)
            time.sleep(max(seconds, 0.0) * (SLOW_FACTOR - 1))

    def _remember(self, f: Fault) -> None:
        if self.record is None:
            return
        self.record.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"fault": str(f), "kind": f.kind, "rank": f.rank, "step": f.step,
                           "host": socket.gethostname(), "restart": int(os.environ.get(ENV_RESTART, "0") or 0),
                           "t": round(time.time(), 3)})
        with self.record.open("a") as out:
            out.write(line + "\n")

    def _slow(self, step: int) -> None:
        self.slow = True

    def _hang(self, step: int) -> None:
        from hpclaunch.runtime.node import progress

        progress.enter("data", step)
        while True:
            time.sleep(3600)

    def _crash(self, step: int) -> None:
        raise InjectedCrashError(f"hpclaunch fault injection: crash on rank {self.rank} after step {step}")

    def _kill(self, step: int) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def _nodefail(self, step: int) -> None:
        node_fail()


_FIRE = {"slow": Injector._slow, "hang": Injector._hang, "crash": Injector._crash, "kill": Injector._kill,
         "nodefail": Injector._nodefail}


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _runs_supervisor(pid: int) -> bool:
    try:
        return _SUPERVISOR in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def node_fail() -> None:
    """SIGKILL every process of the job on this node: the supervisor, the processes it started (they carry its
    tag) and the wrappers above it that run it (the scheduler's task: ``bash -c '... supervise ...'``, a
    container's exec); nothing is left to report, as when the node is lost."""
    tag = os.environ.get(TAG_VAR, "")
    victims: list[int] = []
    if tag:
        supervisor = int(tag.rsplit(".", 1)[1])
        above = _parent(supervisor)
        while above > 1 and _runs_supervisor(above):
            victims.append(above)
            above = _parent(above)
        victims += [supervisor, *tagged(tag)]
    for pid in dict.fromkeys(victims):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    os.kill(os.getpid(), signal.SIGKILL)
