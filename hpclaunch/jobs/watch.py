"""`hpclaunch watch`: a live view of running and recent jobs. One frame = one scheduler call for every
watched job (hpclaunch.jobs.state.statuses) plus the tail of each run's rank-0 metrics: state, elapsed /
limit, step / max steps, last loss, tokens/s, ETA and a sparkline of the loss. On a terminal a rich table
that fits the window; elsewhere one plain line per job per refresh. Standard library only until a table is
drawn (rich, lazily)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.jobs.view import JobView, views
from hpclaunch.logs.read import tail_lines
from hpclaunch.schedulers.base import clock_seconds
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.state.timeline import seconds

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 12  # losses in the sparkline (the newest)
TAIL = 200  # metrics lines read from the end of the file
RECENT = 8  # without JOB: the running jobs and the newest finished, this many rows in all
COLUMNS = ("job", "state", "elapsed/limit", "step", "loss", "tok/s", "ETA", "loss trend")
MIN_WIDTH = {"job": 7, "state": 7, "elapsed/limit": 10, "step": 9, "loss": 6, "tok/s": 6, "ETA": 5,
              "loss trend": SPARK_WIDTH}


@dataclass
class Row:
    job: str
    state: str
    elapsed: str = ""
    limit: str = ""
    step: int | None = None
    max_steps: int | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    eta_s: float | None = None
    losses: tuple[float, ...] = ()
    finished: bool = False
    stragglers: str = ""  # "rank1@node2 3.1x" (a running job's, hpclaunch/state/stragglers.py)
    stalls: str = ""  # "rank1@node2 64s" (a running job's ranks without progress, stragglers.stalled)
    slow: str = ""  # "node3 1.6x swapped" (nodes found slow for stragglers.windows windows, state/slownodes.py)

    def cells(self) -> tuple[str, ...]:
        eta = "" if self.eta_s is None else seconds(self.eta_s)
        elapsed = _span(self.elapsed) + (f"/{_span(self.limit)}" if self.limit else "")
        state = self.state + (f" STALLED {self.stalls}" if self.stalls else "") + \
            (f" straggler {self.stragglers}" if self.stragglers else "") + (f" slow {self.slow}" if self.slow else "")
        return (self.job, state, elapsed, _step(self),
                _num(self.loss), _rate(self.tokens_per_s), eta, sparkline(self.losses))


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """`values` as at most `width` unicode blocks, lowest ▁ to highest █; more values than blocks are averaged
    in equal runs (the trend of the whole tail, not its last noise); all equal: a flat ▄ line."""
    vals = list(values)
    if len(vals) > width:
        edges = [round(i * len(vals) / width) for i in range(width + 1)]
        vals = [sum(vals[a:b]) / (b - a) for a, b in zip(edges, edges[1:], strict=False)]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-12:
        return SPARKS[3] * len(vals)
    top = len(SPARKS) - 1
    return "".join(SPARKS[round((v - lo) / (hi - lo) * top)] for v in vals)


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.4g}"


def _rate(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v / 1e3:.1f}k" if v >= 1e3 else f"{v:.0f}"


def _span(text: str) -> str:
    """squeue's 1-00:00:00 in words (1d00h, as the ETA); as given when it is not a duration (UNLIMITED)."""
    s = clock_seconds(text)
    return text if s is None else seconds(s)


def _count(n: int) -> str:
    return str(n) if n < 10000 else f"{n / 1000:.0f}k" if n < 10**6 else f"{n / 1e6:.1f}M"


def _step(r: Row) -> str:
    if r.step is None:
        return ""
    return f"{_count(r.step)}/{_count(r.max_steps)}" if r.max_steps else _count(r.step)


_MAX_STEPS = re.compile(rb"^\s+max_steps:\s*(\d+)\s*$", re.MULTILINE)


def max_steps(run_dir: Path) -> int | None:
    """train.max_steps from the run's resolved.yaml, found by a line match (no YAML parser: watch stays light)."""
    try:
        found = _MAX_STEPS.search(RunFiles(run_dir).resolved.read_bytes())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _train_records(run_dir: Path) -> list[dict]:
    """Rank 0's training records among the last TAIL metrics lines, oldest first; a step written again after a
    requeue counts once (the last)."""
    path = RunFiles(run_dir).metrics_file(0)
    if not path.is_file():
        return []
    by_step: dict[int, dict] = {}
    for raw in tail_lines(path, TAIL):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step"), int) and isinstance(rec.get("loss"), (int, float)):
            by_step[rec["step"]] = rec
    return [by_step[s] for s in sorted(by_step)]


def _eta(train: list[dict], total: int | None) -> float | None:
    """Seconds to `total` steps at the pace of the records read (their `time` stamps)."""
    if not total or len(train) < 2:
        return None
    first, last = train[0], train[-1]
    t0, t1 = first.get("time"), last.get("time")
    steps = last["step"] - first["step"]
    if not isinstance(t0, (int, float)) or not isinstance(t1, (int, float)) or steps <= 0 or t1 <= t0:
        return None
    return max(0.0, (total - last["step"]) * (t1 - t0) / steps)


def row(v: JobView) -> Row:
    """One job's row from its view (the scheduler's status) and the tail of its rank-0 metrics."""
    r, s, run_dir = v.record, v.status, v.run_dir
    train = _train_records(run_dir)
    total = max_steps(run_dir)
    state = s.state + (f" ({s.pending_text()})" if s.pending_text() else "")
    out = Row(job=r.job_id, state=state, elapsed=s.elapsed or "", limit=s.time_limit or "", max_steps=total,
              finished=s.finished)
    if train:
        last = train[-1]
        tps = last.get("tokens_per_s")
        out.step, out.loss = last["step"], float(last["loss"])
        out.tokens_per_s = float(tps) if isinstance(tps, (int, float)) else None
        out.losses = tuple(float(t["loss"]) for t in train)
        out.eta_s = None if s.finished else _eta(train, total)
    if not s.finished:
        out.stragglers = ", ".join(f"rank{f['rank']}@{f['host'] or '?'} {f['ratio']}x" for f in v.stragglers)
        out.stalls = ", ".join(f"rank{f['rank']}@{f['host'] or '?'} {f['stalled_s']:.0f}s" for f in v.stalls)
    # a slow node stays in the row after the job ends: what it cost is in the job's own history (report)
    out.slow = ", ".join(f"{f['host'] or '?'} {f['ratio'] or 0:.1f}x {'swapped' if f['swapped'] else 'reported'}"
                         for f in v.slow_nodes)
    return out


def progress_text(run_dir: Path) -> str:
    """One line of a running job's progress from its rank-0 metrics: `step 120/1000  loss 3.214  45.0k tok/s
    ETA 12m30s`; empty before the first training record."""
    train = _train_records(run_dir)
    if not train:
        return ""
    total = max_steps(run_dir)
    last = train[-1]
    r = Row(job="", state="", step=last["step"], max_steps=total, loss=float(last["loss"]))
    tps = last.get("tokens_per_s")
    parts = [f"step {_step(r)}", f"loss {_num(r.loss)}"]
    if isinstance(tps, (int, float)):
        parts.append(f"{_rate(float(tps))} tok/s")
    eta = _eta(train, total)
    if eta is not None:
        parts.append(f"ETA {seconds(eta)}")
    return "  ".join(parts)


def chosen(shown: list[JobView]) -> list[JobView]:
    """Without named jobs: the newest RECENT of the candidates, the running ones kept first."""
    live = [v for v in shown if not v.status.finished]
    done = [v for v in shown if v.status.finished]
    keep = live[-RECENT:]
    return [v for v in shown if v in keep or v in done[-max(0, RECENT - len(keep)):]]


def frame(records: list[registry.JobRecord], jobs: Sequence[str] = ()) -> list[Row]:
    """One refresh: one scheduler call for the named jobs (or the newest candidates), then their rows."""
    candidates = [registry.get(j) for j in jobs] if jobs else records[-4 * RECENT:]
    shown = views([(r, []) for r in candidates])
    return [row(v) for v in (shown if jobs else chosen(shown))]


def plain_lines(rows: Sequence[Row], now: str) -> list[str]:
    """One line per job, for a pipe or a log: `HH:MM:SS JOB STATE elapsed E/L step S/M loss L tok/s T eta E`."""
    out = []
    for r in rows:
        parts = [now, r.job, r.state.replace(" ", "_")]
        for key, value in zip(("elapsed", "step", "loss", "tok/s", "eta"), r.cells()[2:7], strict=True):
            if value:
                parts.append(f"{key} {value}")
        if r.stalls:
            parts.append(f"stalled {r.stalls.replace(', ', ',').replace(' ', ':')}")
        if r.stragglers:
            parts.append(f"straggler {r.stragglers.replace(', ', ',').replace(' ', ':')}")
        if r.slow:
            parts.append(f"slow {r.slow.replace(', ', ',').replace(' ', ':')}")
        out.append(" ".join(parts))
    return out
