"""Nodes blamed for a failure, remembered for a while so that later submissions avoid them.

``$HPCLAUNCH_HOME/suspect-nodes.json``: node -> {until (epoch seconds), reason, job, scheduler, evidence}.
Written by the job after a node-level failure (hpclaunch/runtime/node/blame.py, relaunch.py) and read by the
schedulers that can leave nodes out (capability exclude_nodes) at submit, which add the unexpired ones of their
own cluster to ``--exclude``. Not written for a rehearsal (HPCLAUNCH_INJECT: the fault was made, the node is
healthy) nor by a job of a scheduler that cannot exclude nodes (a local job's "node" is this machine).
`hpclaunch suspects` lists them and clears them. Atomic writes; a corrupt file is treated as empty. Standard
library only.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hpclaunch.core.paths import hpclaunch_home


def _path() -> Path:
    return hpclaunch_home() / "suspect-nodes.json"


def load(now: float | None = None) -> dict[str, dict[str, Any]]:
    """The unexpired suspects."""
    now = time.time() if now is None else now
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {node: info for node, info in data.items()
            if isinstance(info, dict) and isinstance(info.get("until"), (int, float)) and info["until"] > now}


def not_remembered(env: Mapping[str, str] | None = None) -> str | None:
    """Why a job's blamed nodes are not to be remembered (None: remember them): a rehearsal's fault was made by
    HPCLAUNCH_INJECT on a healthy node, and a scheduler that cannot leave nodes out has nothing to avoid."""
    env = os.environ if env is None else env
    if env.get("HPCLAUNCH_INJECT"):
        return "a rehearsal (HPCLAUNCH_INJECT): the fault was made, the node is healthy"
    scheduler = env.get("HPCLAUNCH_SCHEDULER")
    if scheduler:
        from hpclaunch.core.backends import SCHEDULERS

        if scheduler in SCHEDULERS and "exclude_nodes" not in SCHEDULERS[scheduler].capabilities:
            return f"the {scheduler} scheduler does not leave nodes out"
    return None


def remember(nodes: tuple[str, ...] | list[str], reason: str, job_id: str, *, hours: float = 24.0,
             evidence: str | None = None) -> None:
    current = load()
    until = time.time() + hours * 3600
    for node in nodes:
        current[node] = {"until": round(until), "reason": reason, "job": job_id,
                         "scheduler": os.environ.get("HPCLAUNCH_SCHEDULER"), "evidence": evidence}
    _write(current)


def _write(current: dict[str, dict[str, Any]]) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def clear(nodes: Iterable[str] = ()) -> list[str]:
    """Forget these suspects (none named: every one); the nodes forgotten."""
    current = load()
    gone = sorted(n for n in current if not nodes or n in set(nodes))
    _write({n: info for n, info in current.items() if n not in gone})
    return gone


def excluded(scheduler: str | None = None) -> list[str]:
    """The suspects a submission to `scheduler` leaves out: those blamed by its jobs, or by a job that did not
    say its scheduler (recorded before it was said); a local job's machine never."""
    return sorted(n for n, info in load().items()
                  if scheduler is None or info.get("scheduler") in (None, scheduler)
                  or {info.get("scheduler"), scheduler} <= {"slurm", "slurm-rest"})
