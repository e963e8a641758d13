"""Each rank's progress (step, phase, time of the last change), for its node's supervisor: the hang watchdog, and
the node record that status, watch, stragglers, goodput and blame read (hpclaunch/runtime/node/noderecord.py).

The training loop only sets attributes (``progress.enter("data", step)``): no system call, no device
sync per step. A daemon thread writes the record into the node-local folder the node's supervisor made
(``$HPCLAUNCH_NODE_STATE/rank-<R>.json``, in memory; fixed size, overwritten in place) at most once per second
and only when it changed; the supervisor publishes its ranks' records into the shared run directory, one file
per node, at most every few seconds. A rank blocked in a collective or a device wait still gets its last state
written, because those waits release the GIL; a rank killed by SIGKILL leaves its last one. Outside a
supervised launch it records nothing.

Phases: init (imports, process group, model), data (fetching a batch), forward (forward and backward,
with the gradient all-reduce), optimizer (step; ZeRO's collectives), collective (the log step's
all-reduce), eval, checkpoint, done.

For stragglers (hpclaunch/state/stragglers.py) the record also holds ``win``: [steps, seconds, waiting seconds]
summed over the rank's last HPCLAUNCH_STRAGGLER_WINDOW finished steps (the profile's stragglers.window): the
wall time from one finished optimizer step to the next, and the part of it spent in WAITING_PHASES, where a
rank waits for its peers; and ``sf``, the profile's stragglers.factor (HPCLAUNCH_STRAGGLER_FACTOR), so that
`status` judges them without reading the job's YAML. For the slow-node judge (hpclaunch/runtime/node/slowswap.py)
it holds ``hw``: the rank's last HPCLAUNCH_STRAGGLER_WINDOWS (stragglers.windows) + SLACK_WINDOWS whole windows,
each [its index (step - 1) // window, seconds, waiting seconds]: windows of the same steps on every rank. The node
records the judge reads were published at different moments (up to a publishing interval apart, many windows of
fast steps), so each holds more windows than the judge needs and the judge keeps what it read before. Standard
library only.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections import deque
from pathlib import Path

from hpclaunch.runtime.node import noderecord
from hpclaunch.state.runfiles import RunFiles

RECORD_BYTES = 384
WINDOW_ENV = "HPCLAUNCH_STRAGGLER_WINDOW"
FACTOR_ENV = "HPCLAUNCH_STRAGGLER_FACTOR"
WINDOWS_ENV = "HPCLAUNCH_STRAGGLER_WINDOWS"
DEFAULT_WINDOW = 10
DEFAULT_WINDOWS = 5
WINDOW_BYTES = 32  # the record's room for each window of ``hw``
SLACK_WINDOWS = 16  # windows kept beyond stragglers.windows: the other node records may be this many behind
_HOST = socket.gethostname()
PHASES = ("init", "data", "forward", "optimizer", "collective", "eval", "checkpoint", "done")
# Phases in which a rank waits for its peers when one of them stops.
WAITING_PHASES = frozenset({"forward", "optimizer", "collective", "checkpoint"})


class Progress:
    """One rank's progress record and the thread that writes it."""

    def __init__(self, path: Path | None, rank: int, interval: float = 1.0, window: int = DEFAULT_WINDOW,
                 factor: float | None = None, windows: int = DEFAULT_WINDOWS) -> None:
        self.path, self.rank, self.interval, self.factor = path, rank, interval, factor
        self.step, self.phase, self.changed = 0, "init", time.time()
        self.steps: deque[tuple[float, float]] = deque(maxlen=max(window, 1))  # (seconds, waiting) per step
        self.width = max(window, 1)
        kept = windows + SLACK_WINDOWS if windows > 0 else 0
        self.whole: deque[list[float]] = deque(maxlen=kept)  # [index, seconds, waiting] per whole window
        self._open: list[float] = [-1, 0, 0, 0]  # the window being filled: index, steps, seconds, waiting
        self.size = RECORD_BYTES + WINDOW_BYTES * kept
        self._waited, self._step_end = 0.0, 0.0
        self._written: tuple[int, str, float] | None = None
        self._lock = threading.Lock()
        self._fd: int | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            self.flush()
            threading.Thread(target=self._run, name="hpclaunch-progress", daemon=True).start()

    def enter(self, phase: str, step: int | None = None) -> None:
        """Cheap: attribute stores only (called several times per training step)."""
        if phase != self.phase or (step is not None and step != self.step):
            now = time.time()
            if self.phase in WAITING_PHASES:
                self._waited += now - self.changed
            if step is not None and step > self.step and phase == "optimizer":
                self._finished_step(now, step)
            if step is not None:
                self.step = step
            self.phase = phase
            self.changed = now

    def _finished_step(self, now: float, step: int) -> None:
        """An optimizer step finished: its time since the one before and the part spent waiting; the first after
        the start (imports, warm-up) only starts the count."""
        if self._step_end:
            self.steps.append((now - self._step_end, self._waited))
            self._add_to_window(step, now - self._step_end, self._waited)
        self._step_end, self._waited = now, 0.0

    def _add_to_window(self, step: int, seconds: float, waiting: float) -> None:
        """Step `step` into its window ((step - 1) // width); a window is kept once it holds all its steps."""
        index = (step - 1) // self.width
        if index != self._open[0]:
            self._open = [index, 0, 0.0, 0.0]
        self._open[1] += 1
        self._open[2] += seconds
        self._open[3] += waiting
        if self._open[1] == self.width and self.whole.maxlen:
            self.whole.append([index, round(self._open[2], 3), round(self._open[3], 3)])

    def window(self) -> list[float]:
        """[steps, seconds, waiting seconds] over the window."""
        return [len(self.steps), round(sum(s for s, _ in self.steps), 3), round(sum(w for _, w in self.steps), 3)]

    def flush(self) -> None:
        """Write the record now, if it changed (also called at phase ends that matter: done, checkpoint)."""
        if self._fd is None:
            return
        with self._lock:
            state = (self.step, self.phase, self.changed)
            if state == self._written:
                return
            record = json.dumps({"rank": self.rank, "step": state[0], "phase": state[1], "t": round(state[2], 3),
                                 "host": _HOST, "pid": os.getpid(), "win": self.window(),
                                 "sf": self.factor, **({"hw": list(self.whole)} if self.whole.maxlen else {})})
            data = record.encode()
            self.size = max(self.size, len(data))  # a longer record than ever: later ones pad over all of it
            os.pwrite(self._fd, data.ljust(self.size), 0)
            self._written = state

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            try:
                self.flush()
            except OSError:
                return


_CURRENT: list[Progress] = []


def current() -> Progress:
    """This process's progress record, made on first use from the job's environment (RANK, the node-local folder
    of its supervisor); outside a supervised launch it records nothing."""
    if not _CURRENT:
        rank = int(os.environ.get("RANK", os.environ.get("RANK_ID", "0")) or 0)
        folder = noderecord.from_env()
        window = int(os.environ.get(WINDOW_ENV, "") or DEFAULT_WINDOW)
        factor = float(os.environ.get(FACTOR_ENV, "") or 0) or None
        windows = int(os.environ.get(WINDOWS_ENV, "") or DEFAULT_WINDOWS)
        _CURRENT.append(Progress(noderecord.rank_file(folder, rank) if folder else None, rank, window=window,
                                 factor=factor, windows=windows))
    return _CURRENT[0]


def enter(phase: str, step: int | None = None) -> None:
    current().enter(phase, step)


def read_all(run: RunFiles, restart: int) -> dict[int, dict[str, object]]:
    """Every rank's last published record of one restart (the node records): rank -> {step, phase, t, host, ...}."""
    return run.progress_records(restart)
