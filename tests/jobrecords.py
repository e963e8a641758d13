"""Register a job record for a run directory made by a test (as `hpclaunch submit` would)."""

from __future__ import annotations

from pathlib import Path

from hpclaunch import registry


def add_local_record(job_id: str, run_dir: Path, recipe: str = "x", preset: str | None = None) -> None:
    registry.add(registry.JobRecord(job_id, "local", "local", recipe, preset, "torchrun", "1n2g", recipe,
                                    str(run_dir), "2026-11-22T07:00:00+0000"))
