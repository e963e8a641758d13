"""The goodput a job can expect, before it is queued: failures against checkpoints (docs/troubleshooting.md#a-promise-
at-submit).

Failures arrive at random, `rate` per node-hour on each of the job's N training nodes, so the job meets one every

    M = 1 / (N x rate) hours                                          (its mean time between failures)

It saves every tau seconds of training, each save blocking training delta seconds; each failure costs the recovery
R (from the fault to the next step) and, on average, half an interval trained again. To first order (Young 1974,
Daly 2006):

    goodput = tau / (tau + delta) x (1 - (R + (tau + delta) / 2) / M)   x N / (N + spare nodes)
    best tau = sqrt(2 x delta x M) - delta                              (the interval that maximizes it)

tau is the recipe's train.save_every x the step time, or the whole run when it saves only at its end (the run: its
max_steps x the step time, at most the time limit); where the step time is unknown, the best interval is said in
minutes only and the goodput is the one at the best interval. The start-up
before the first step and the time in the queue are outside the figure; `report` sets the measured goodput after
the first start-up beside it. Pure arithmetic: submission/measured.py gathers the inputs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

FAR = 2.0  # the recipe's interval is "far" from the best when it is more than this many times longer or shorter


@dataclass(frozen=True)
class Figure:
    """One input and where it came from (``measured, median of 4 saves (job 12345)``, ``profile
    restarts.recovery_time``)."""

    value: float
    source: str


@dataclass(frozen=True)
class Inputs:
    nodes: int
    limit_s: float  # the job's time limit
    rate: Figure  # failures per node-hour
    write: Figure  # seconds a checkpoint blocks training
    recovery: Figure  # seconds from a fault to the next step
    step: Figure | None = None  # seconds per step, when measured
    save_every: int = 0  # the recipe's train.save_every (steps; 0: at the end only)
    spare_nodes: int = 0
    max_steps: int = 0  # the recipe's train.max_steps (0: none)

    @property
    def run_s(self) -> float:
        """How long the job trains: its steps at the step time where both are known, at most its time limit."""
        if self.step is None or self.max_steps <= 0:
            return self.limit_s
        return min(self.limit_s, self.max_steps * self.step.value)


def mtbf_s(nodes: int, rate: float) -> float:
    """The job's mean time between failures in seconds (inf when nothing fails)."""
    return math.inf if rate <= 0 else 3600.0 / (nodes * rate)


def best_interval_s(write_s: float, mtbf: float) -> float:
    """Young/Daly: sqrt(2 delta M) - delta, the seconds of training between saves that maximize goodput."""
    return math.inf if math.isinf(mtbf) else max(0.0, math.sqrt(2.0 * write_s * mtbf) - write_s)


def goodput(interval_s: float, write_s: float, recovery_s: float, mtbf: float) -> float:
    """The share of the time that trains, saving every `interval_s` (see the module's docstring); 0 at worst."""
    if interval_s <= 0:
        return 0.0
    segment = interval_s + write_s
    lost = 0.0 if math.isinf(mtbf) else (recovery_s + segment / 2.0) / mtbf
    return max(0.0, interval_s / segment * (1.0 - lost))


@dataclass(frozen=True)
class Promise:
    """What `submit` promises (written to RUN_DIR/promise.json) and what `report` sets the outcome beside."""

    inputs: Inputs
    mtbf_h: float
    failures: float  # expected in the run
    best_s: float  # Young/Daly (inf: no failures expected)
    best_goodput: float
    interval_s: float | None  # the recipe's, in seconds of training (None: step time unknown)
    goodput: float  # at the recipe's interval, else at the best

    @property
    def best_steps(self) -> int | None:
        step = self.inputs.step
        if step is None or step.value <= 0 or math.isinf(self.best_s):
            return None
        return max(1, round(self.best_s / step.value))

    @property
    def far(self) -> bool:
        """The recipe's interval is more than FAR times longer or shorter than the best (at most the run)."""
        best = min(self.best_s, self.inputs.run_s)
        if self.interval_s is None or best <= 0:
            return False
        return not 1 / FAR <= self.interval_s / best <= FAR

    def lines(self) -> list[str]:
        """The dry run's words, each within 69 columns (80 with the ``hpclaunch: `` of the CLI)."""
        i = self.inputs
        run = (f"{_dur(i.run_s)} ({i.max_steps} steps)" if i.run_s < i.limit_s else f"{_dur(i.limit_s)} (the time "
               "limit)")
        out = [f"expected goodput {_pct(self.goodput)} after start-up",
               f"  {i.nodes} node(s)" + (f" (+{i.spare_nodes} spare)" if i.spare_nodes else "") + f" x {run}",
               f"  a failure every {_hours(self.mtbf_h)} ({_count(self.failures)} expected in the run):",
               f"    {i.rate.value:.3g} per node-hour, {i.rate.source}",
               f"  a checkpoint blocks training {_secs(i.write.value)}:", f"    {i.write.source}",
               f"  a recovery takes {_secs(i.recovery.value)}:", f"    {i.recovery.source}"]
        if i.step is not None:
            out += [f"  a step takes {_secs(i.step.value)}:", f"    {i.step.source}"]
        return out + self._interval_lines()

    def _interval_lines(self) -> list[str]:
        i = self.inputs
        if math.isinf(self.best_s):
            return ["  best checkpoint interval: none needed (no failures expected)"]
        steps = self.best_steps
        best = f"every {_dur(self.best_s)}" + (f" ({steps:,} steps)" if steps is not None else "")
        out = [f"  best checkpoint interval (Young/Daly): {best}"]
        if self.best_s >= i.run_s:
            out.append("    longer than the run: the save at the end is enough")
        if i.save_every <= 0:
            out.append("  the recipe saves at the end only (train.save_every 0)")
        elif self.interval_s is None:
            out.append(f"  the recipe saves every {i.save_every:,} steps (step time unknown)")
        else:
            out.append(f"  the recipe saves every {i.save_every:,} steps = {_dur(self.interval_s)}"
                       + (": near it" if not self.far else ""))
        if self.far:
            out.append(f"    far from it: {_pct(self.best_goodput)} at the best (train.save_every)")
        return out

    def summary(self) -> str:
        """One line: what `submit` says once the job is queued, and `report` beside the outcome."""
        steps = self.best_steps
        best = ("none needed" if math.isinf(self.best_s)
                else _dur(self.best_s) + (f" = {steps} steps" if steps is not None else ""))
        return (f"expected goodput {_pct(self.goodput)} after start-up; best checkpoint interval {best}"
                + (" (train.save_every is far from it)" if self.far else ""))

    def to_json(self) -> dict[str, Any]:
        """The promise as plain JSON (no failures expected: mtbf_h and best_s null); `from_json` reads it back from
        its inputs."""
        own = {k: None if isinstance(v, float) and math.isinf(v) else v
               for k, v in asdict(self).items() if k != "inputs"}
        return {**own, "inputs": asdict(self.inputs), "best_steps": self.best_steps, "far": self.far}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Promise:
        i = dict(data["inputs"])
        for key in ("rate", "write", "recovery", "step"):
            i[key] = None if i.get(key) is None else Figure(**i[key])
        return make(Inputs(**i))


def make(i: Inputs) -> Promise:
    """The promise of a job with inputs `i` (see the module's docstring)."""
    mtbf = mtbf_s(i.nodes, i.rate.value)
    run = i.run_s
    best = min(best_interval_s(i.write.value, mtbf), run)
    best_goodput = goodput(best, i.write.value, i.recovery.value, mtbf)
    if i.save_every <= 0:
        interval: float | None = run
    elif i.step is not None:
        interval = min(i.save_every * i.step.value, run)
    else:
        interval = None
    share = i.nodes / (i.nodes + i.spare_nodes)
    at = best_goodput if interval is None else goodput(interval, i.write.value, i.recovery.value, mtbf)
    return Promise(i, mtbf / 3600.0, run / mtbf, best_interval_s(i.write.value, mtbf), best_goodput * share,
                   interval, at * share)


def outcome_line(measured: float, whole: float, recoveries: int) -> str:
    """``outcome: goodput 96.2 % after start-up (88.0 % of the whole allocation), 1 recovery``"""
    return (f"outcome: goodput {_pct(measured)} after start-up ({_pct(whole)} of the whole allocation), "
            f"{recoveries} recover{'y' if recoveries == 1 else 'ies'}")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _num(x: float) -> str:
    """Three significant digits, never in exponent form: ``0.00209``, ``63.2``, ``1,011``."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def _count(x: float) -> str:
    """``0.76``, ``2.2``, ``under 0.01``: how many failures a run expects."""
    return "under 0.01" if 0 < x < 0.01 else f"{x:.2g}"


def _secs(s: float) -> str:
    return f"{_num(s)} s"


def _hours(h: float) -> str:
    return f"{_num(h)} h" if h >= 1 else f"{_num(60 * h)} min"


def _dur(s: float) -> str:
    """``40 min``, ``2.5 h``, ``45 s``: a duration a person reads at a glance."""
    if s >= 3600:
        return f"{_num(s / 3600)} h"
    return f"{_num(s / 60)} min" if s >= 60 else _secs(s)
