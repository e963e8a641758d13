"""Nodes blamed for a failure, remembered for a while so that later submissions avoid them.

``$HPCLAUNCH_HOME/suspect-nodes.json``: node -> {until (epoch seconds), reason, job}. Written by the job
after a node-level failure (hpclaunch/runtime/node/blame.py) and read by the Slurm scheduler at submit, which
adds the unexpired ones to ``--exclude``. Atomic writes; a corrupt file is treated as empty. Standard
library only.
"""

from __future__ import annotations

import json
import os
import time
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


def remember(nodes: tuple[str, ...] | list[str], reason: str, job_id: str, *, hours: float = 24.0) -> None:
    current = load()
    until = time.time() + hours * 3600
    for node in nodes:
        current[node] = {"until": round(until), "reason": reason, "job": job_id}
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def excluded() -> list[str]:
    return sorted(load())
