"""Refuse a job whose hub assets are not staged (filled in by the stage-assets work)."""

from __future__ import annotations

from hpclaunch.jobspec import JobSpec


def check_job_assets(spec: JobSpec) -> None:
    """Raise AssetError when a hub asset the job needs is missing, incomplete or corrupt."""
    return None
