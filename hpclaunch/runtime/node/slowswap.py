"""A node that stays slow is swapped for a spare node at the next log step (docs/troubleshooting.md#stragglers).

Node 0's supervisor judges, from the node records it holds in memory (the other nodes send theirs to it,
hpclaunch/runtime/node/recordlink.py; once per publishing interval, no shared-filesystem read). Each rank's progress
record (hpclaunch/runtime/node/progress.py) holds its last whole windows of ``stragglers.window`` steps (``hw``),
the same steps on every rank; the judge keeps the windows of every read (the records were published at different
moments, so one read may show rank A's newest windows and rank B's older ones). In each window the ranks are
compared as status compares stragglers (hpclaunch/state/stragglers.py: own step time over ``stragglers.factor`` x
the median); a node with a slow rank in each of the last ``stragglers.windows`` consecutive windows every rank
finished is slow. Then, once per launch:

- with a spare node of the allocation free, a swap left (``stragglers.max_swaps``) and a relaunch left
  (``restarts.max``): the finding goes to ``RUN_DIR/logs/slow.restart-<N>.json`` with ``"action": "swap"``, and
  the supervisor sends USR1 to its ranks: every rank agrees at the next log step, saves a checkpoint there and
  exits 0 (hpclaunch/runtime/train/loop.py). The launch thus ends 0 with that file; the job script (blocks/
  relaunch.sh.j2) asks hpclaunch/runtime/node/relaunch.py, whose blame (cause ``slow``) drops the node and
  relaunches from that checkpoint on the spare: no step is computed again.
- else the finding is written with ``"action": "report"`` and why not: `status` and `report` show it, the job
  goes on.

A preemption's USR1 reaches the job script itself, which requeues (signals.sh.j2); a cancel's TERM marks the job
stopping: neither is read as a swap, and a swap's USR1 goes to the ranks only, never to the job script.

The job script passes what the supervisor cannot know in ``HPCLAUNCH_SWAP_BUDGET``: "SPARES,SWAPS,RELAUNCHES", the
spare nodes of the allocation neither in use nor dropped, the swaps left and the relaunches left. Standard library
only.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hpclaunch.runtime.node.progress import (
    DEFAULT_WINDOW,
    DEFAULT_WINDOWS,
    FACTOR_ENV,
    WINDOW_ENV,
    WINDOWS_ENV,
)
from hpclaunch.state.runfiles import RunFiles, read_json_lines
from hpclaunch.state.stragglers import DEFAULT_FACTOR, slower

BUDGET_ENV = "HPCLAUNCH_SWAP_BUDGET"
SWAP, REPORT = "swap", "report"

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    """A node slow in `windows` consecutive windows: its slowest rank there, its mean ratio to the median."""

    host: str
    rank: int
    ratio: float
    windows: int
    window_steps: int
    first_step: int  # the first step of the first slow window
    step: int  # the newest step any rank reported when it was found

    def text(self) -> str:
        """``node3 slow for 5 windows (1.6x the median)``"""
        return f"{self.host} slow for {self.windows} windows ({self.ratio:.1f}x the median)"


def _windows(records: Mapping[int, Record]) -> dict[int, dict[int, tuple[float, float]]]:
    """window index -> rank -> (seconds, waiting), from each rank's ``hw``."""
    out: dict[int, dict[int, tuple[float, float]]] = {}
    for rank, rec in records.items():
        for w in rec.get("hw") or ():
            if isinstance(w, list) and len(w) == 3 and all(isinstance(v, (int, float)) for v in w) and w[1] > 0:
                out.setdefault(int(w[0]), {})[rank] = (float(w[1]), float(w[2]))
    return out


def judge(records: Mapping[int, Record], *, windows: int, width: int, factor: float) -> Finding | None:
    """The node slow in each of the last `windows` consecutive windows that every rank has finished (the one slowest
    on average when several are), or None."""
    hosts = {rank: str(rec.get("host")) for rank, rec in records.items() if rec.get("host") and rec.get("hw")}
    per_window = _windows({r: records[r] for r in hosts})
    full = sorted(i for i, ranks in per_window.items() if set(ranks) == set(hosts))
    last = full[-windows:]
    if windows < 1 or len(hosts) < 2 or len(last) < windows or last[-1] - last[0] != windows - 1:
        return None
    slow_in: list[dict[str, float]] = []  # per window: host -> the highest ratio of its ranks there
    slowest: dict[str, tuple[float, int]] = {}  # host -> (its highest ratio, that rank)
    for index in last:
        slow, median = slower({r: (width, s, w) for r, (s, w) in per_window[index].items()}, factor)
        seen: dict[str, float] = {}
        for rank, own in slow.items():
            ratio = own / median
            seen[hosts[rank]] = max(seen.get(hosts[rank], 0.0), ratio)
            slowest[hosts[rank]] = max(slowest.get(hosts[rank], (0.0, rank)), (ratio, rank))
        slow_in.append(seen)
    always = set.intersection(*(set(seen) for seen in slow_in))
    if not always:
        return None
    mean = {h: statistics.mean(seen[h] for seen in slow_in) for h in always}
    host = max(sorted(always), key=mean.__getitem__)
    return Finding(host, slowest[host][1], round(mean[host], 2), windows, width, last[0] * width + 1,
                   max(int(rec.get("step") or 0) for rec in records.values()))


def budget(env: Mapping[str, str]) -> tuple[int, int, int]:
    """(spare nodes free, swaps left, relaunches left) from HPCLAUNCH_SWAP_BUDGET; all 0 without it."""
    try:
        spares, swaps, relaunches = (int(v) for v in env.get(BUDGET_ENV, "").split(","))
    except ValueError:
        return 0, 0, 0
    return spares, swaps, relaunches


def why_not(spares: int, swaps: int, relaunches: int) -> str | None:
    """Why a slow node cannot be swapped now (None: it can)."""
    if spares <= 0:
        return "no spare node free (submit --spare-nodes K gives the allocation spares)"
    if swaps <= 0:
        return "no swap left (stragglers.max_swaps)"
    if relaunches <= 0:
        return "no relaunch left (restarts.max)"
    return None


class SlowWatch:
    """Node 0's judge over one launch: fed the job's records at most once per publishing interval, it decides once."""

    def __init__(self, run: RunFiles, restart: int, *, windows: int, width: int, factor: float,
                 budget: tuple[int, int, int]) -> None:
        self.run, self.restart = run, restart
        self.windows, self.width, self.factor, self.budget = windows, width, factor, budget
        self.decided: dict[str, Any] | None = None
        self.seen: dict[int, dict[int, list[float]]] = {}  # rank -> window index -> [index, seconds, waiting]

    def _remember(self, records: Mapping[int, Record]) -> dict[int, Record]:
        """The records with every window read so far (the newest 4 x windows + 16 of each rank)."""
        keep = 4 * self.windows + 16
        merged: dict[int, Record] = {}
        for rank, rec in records.items():
            mine = self.seen.setdefault(rank, {})
            for w in rec.get("hw") or ():
                if isinstance(w, list) and w and isinstance(w[0], (int, float)):
                    mine[int(w[0])] = w
            for old in sorted(mine)[:-keep]:
                del mine[old]
            merged[rank] = {**rec, "hw": [mine[i] for i in sorted(mine)]}
        return merged

    @classmethod
    def from_env(cls, run: RunFiles, restart: int, node: str, env: Mapping[str, str] | None = None
                 ) -> SlowWatch | None:
        """Node 0's judge; None on the other nodes and with stragglers.windows 0."""
        env = os.environ if env is None else env
        windows = int(env.get(WINDOWS_ENV, "") or DEFAULT_WINDOWS)
        if node != "0" or windows <= 0:
            return None
        return cls(run, restart, windows=windows, width=int(env.get(WINDOW_ENV, "") or DEFAULT_WINDOW),
                   factor=float(env.get(FACTOR_ENV, "") or DEFAULT_FACTOR), budget=budget(env))

    def check(self, records: Mapping[int, Record], now: float) -> dict[str, Any] | None:
        """The finding, the first time a node is found slow (written to RUN_DIR/logs/slow.restart-<N>.json); its
        ``action`` says whether to swap it (the caller signals its ranks) or only report it."""
        if self.decided is not None:
            return None
        found = judge(self._remember(records), windows=self.windows, width=self.width, factor=self.factor)
        if found is None:
            return None
        why = why_not(*self.budget)
        text = found.text() + (f": not swapped: {why}" if why else ": swapping it at the next log step")
        self.decided = {**asdict(found), "restart": self.restart, "decided_at": round(now, 3),
                        "action": REPORT if why else SWAP, "why_not": why, "summary": found.text(), "text": text}
        path = self.run.slow_verdict(self.restart)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(self.decided, indent=1) + "\n")
            os.replace(tmp, path)
        except OSError:  # a finding that cannot be written cannot be acted on: the job goes on as it is
            self.decided["action"] = REPORT
        return self.decided


def swap_asked(run: RunFiles, restart: int) -> dict[str, Any] | None:
    """The finding of a swap this restart's launch ended for (it ended 0): the file says swap and the ranks' last
    checkpoint in this restart was saved for the signal (not a run that finished before it); else None."""
    try:
        found = json.loads(run.slow_verdict(restart).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("action") != SWAP:
        return None
    saved = [c for c in read_json_lines(run.checkpoint_log) if c.get("restart") == restart]
    return found if saved and saved[-1].get("why") == "signal" else None
