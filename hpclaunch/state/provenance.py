"""``RUN_DIR/provenance.json`` as a file: read whole (or {}), written atomically. Submit writes its half
(hpclaunch/submit/provenance.py), the job adds its own (hpclaunch/runtime/node/provenance.py), status and compare
read it. Standard library only."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read(path: Path) -> dict[str, Any]:
    """The provenance file as a dict; {} when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(path: Path, data: Mapping[str, Any]) -> None:
    """Write beside the final name, then rename: a reader sees the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
