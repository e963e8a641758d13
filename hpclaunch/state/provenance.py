"""``RUN_DIR/provenance.json``: read whole (or {}), written atomically, summed up in one line (`status`) and
compared key by key (`compare`). Submit writes its half (hpclaunch/submission/provenance.py), the job adds its
own (hpclaunch/runtime/node/provenance.py). Standard library only."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hpclaunch.state.runfiles import RunFiles

# differ between any two runs and say nothing about what they ran with
_PER_RUN = {"submitted_at", "job.job_id", "job.restart", "job.started_at", "recipe.source"}
_PER_RUN_ENV = {"HPCLAUNCH_JOB_ID", "HPCLAUNCH_RUN_DIR", "HPCLAUNCH_CONFIG", "HPCLAUNCH_LOG_DIR", "HPCLAUNCH_RESTART",
                "MASTER_PORT"}
# a scheduler's variables of one job (whichever scheduler: PREFIX_JOB_ID, PREFIX_JOBID, PREFIX_ARRAY_TASK_ID, ...)
_PER_JOB_VAR = re.compile(r"^[A-Z]+_(?:JOB_?ID|TASK_PID|ARRAY_[A-Z_]+|SUBMIT_DIR|JOB_(?:START|END)_TIME|RESTART_COUNT|"
                          r"JOB_NAME)$")


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


def load(run_dir: Path) -> dict[str, Any]:
    """A run's provenance ({} when it has none yet)."""
    return read(RunFiles(run_dir).provenance)


def summary(p: Mapping[str, Any]) -> str | None:
    """One line: version, recipe commit, Python and a few key packages, modules, nodes, devices, assets."""
    if not p:
        return None
    parts = [f"hpclaunch {p.get('hpclaunch_version', '?')}"]
    git = (p.get("recipe") or {}).get("git")
    if git:
        parts.append(f"recipe {str(git.get('commit', ''))[:10]}{' (dirty)' if git.get('dirty') else ''}")
    elif "recipe" in p:
        parts.append("recipe not in git")
    pkgs = p.get("packages")
    if isinstance(pkgs, dict):
        lowered = {k.lower(): v for k, v in pkgs.items()}
        key = [f"{n} {lowered[n]}" for n in ("torch", "transformers", "deepspeed", "mindspore") if n in lowered]
        parts.append(f"python {(p.get('job') or {}).get('python', '?')}, {len(pkgs)} packages"
                     + (f" ({', '.join(key)})" if key else ""))
    mods = (p.get("modules") or {}).get("loaded")
    if mods is not None:
        parts.append(f"modules {' '.join(mods)}" if mods else "no modules")
    dev = p.get("devices")
    if isinstance(dev, dict):
        parts.append(f"{dev.get('count')} x {'/'.join(dev.get('models') or [])} (driver {dev.get('driver')})"
                     if dev.get("tool") and dev.get("count") else "no accelerator (CPU)")
    if "nodes" in p:
        parts.append(f"nodes {(p.get('nodes') or {}).get('nodelist')}")
    if p.get("assets"):
        parts.append(f"{len(p['assets'])} asset(s)")
    if "packages" not in p:
        parts.append("job part not written yet")
    return "; ".join(parts)


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "repo_id" in v for v in value):
        for v in value:  # assets: by kind and repo, not by position
            yield from _flat(v, f"{prefix}.{v.get('kind')}:{v.get('repo_id')}")
    else:
        yield prefix, value


def _per_run(key: str) -> bool:
    if key in _PER_RUN or key.endswith(".path"):
        return True
    return key.startswith("env.") and (key[4:] in _PER_RUN_ENV or bool(_PER_JOB_VAR.match(key[4:])))


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted key, value in a, value in b) for everything that differs, per-run values (ids, times, the run
    directory) left out; None stands for absent."""
    fa, fb = dict(_flat(dict(a))), dict(_flat(dict(b)))
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))
            if not _per_run(k) and fa.get(k) != fb.get(k)]
