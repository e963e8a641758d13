"""A content-addressed cache of results hpclaunch can recompute at will: parsed profile/recipe YAML
and rendered run-directory files. Each entry's name is a hash of everything its content depends on,
so an entry is never stale: a changed input is a different name. A cache that cannot be read or
written is simply not used. Off with ``HPCLAUNCH_NO_CACHE=1``.

    ${XDG_CACHE_HOME:-~/.cache}/hpclaunch/<kind>/<sha256>.json

Why: parsing YAML needs PyYAML (~12 ms to import) and rendering needs Jinja2 (~22 ms to import and
build its lexer), most of a dry-run's own time; a cached entry is one small JSON read. Standard library
only.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def enabled() -> bool:
    return os.environ.get("HPCLAUNCH_NO_CACHE", "") not in ("1", "true", "yes")


def _dir(kind: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hpclaunch" / kind


def key(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


_PACKAGE = Path(__file__).resolve().parents[1]  # the hpclaunch package folder


def code_stamp(*files: str) -> str:
    """Names, sizes and modification times of hpclaunch's own files (relative to the package; a folder
    means its .py files): a cached result depends on the code that made it, so changed code is a miss."""
    parts = []
    for name in files:
        path = _PACKAGE / name
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            try:
                st = f.stat()
            except OSError:
                continue
            parts.append(f"{f.relative_to(_PACKAGE)}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def get(kind: str, name: str) -> Any | None:
    if not enabled():
        return None
    try:
        return json.loads((_dir(kind) / f"{name}.json").read_bytes())
    except (OSError, ValueError):
        return None


def put(kind: str, name: str, value: Any) -> None:
    """Store `value` (JSON data) atomically; silently skipped when it cannot be written."""
    if not enabled():
        return
    folder = _dir(kind)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(value, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, folder / f"{name}.json")
    except (OSError, TypeError, ValueError):
        return


def exact_json(value: Any) -> bool:
    """True when `value` survives a JSON round trip unchanged (no int keys, tuples, dates, bytes...)."""
    try:
        return bool(json.loads(json.dumps(value)) == value)
    except (TypeError, ValueError):
        return False
