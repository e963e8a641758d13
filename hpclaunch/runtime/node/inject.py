"""Fault injection, to rehearse a cluster's failure handling: ``HPCLAUNCH_INJECT=KIND:RANK:STEP``.

Set it in the environment of ``hpclaunch submit``; the job script exports it to every rank, on every
scheduler. Rank RANK, after finishing optimizer step STEP, then

    hang   sleeps forever (in the data phase), as a rank stuck in I/O or a dead device would
    crash  raises an exception (the rank exits 1 with a traceback)
    kill   sends itself SIGKILL (exit -9, as the OOM killer does)
    slow   becomes a straggler: every later step takes 5x as long (the extra time outside the collectives, in
           the data phase, as a rank reading from a slow disk: the others wait for it in theirs)

It fires in the first run of a job only (restart 0, not in a retry), so a resumed job can succeed.
Standard library only; see docs/troubleshooting.md.
"""

from __future__ import annotations

import os
import signal
import time

from hpclaunch.config.faults import ENV, Fault

SLOW_FACTOR = 5.0


class InjectedCrashError(RuntimeError):
    """The exception `crash` raises."""


class Injector:
    """Called by the training loop once per optimizer step with the step just finished and its duration."""

    def __init__(self, fault: Fault | None, rank: int) -> None:
        self.fault = fault if fault is not None and fault.rank == rank else None
        self.rank = rank

    @classmethod
    def from_env(cls, rank: int) -> Injector:
        text = os.environ.get(ENV, "")
        first_run = (os.environ.get("HPCLAUNCH_RESTART", "0") or "0") == "0" and \
            (os.environ.get("HPCLAUNCH_RETRY", "0") or "0") == "0"
        return cls(Fault.parse(text) if text and first_run else None, rank)

    def after_step(self, step: int, seconds: float) -> None:
        f = self.fault
        if f is None or step < f.step:
            return
        if f.kind == "slow":
            from hpclaunch.runtime.node import progress

            progress.enter("data", step)
            time.sleep(max(seconds, 0.0) * (SLOW_FACTOR - 1))
            return
        if step != f.step:
            return
        print(f"hpclaunch: fault injection: {f.kind} on rank {self.rank} after step {step}", flush=True)
        if f.kind == "hang":
            from hpclaunch.runtime.node import progress

            progress.enter("data", step)
            while True:
                time.sleep(3600)
        if f.kind == "crash":
            raise InjectedCrashError(f"hpclaunch fault injection: crash on rank {self.rank} after step {step}")
        if f.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
