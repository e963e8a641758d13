"""A sweep in the registry: the sweep's own record and its elements' records, each pointing to it by id
(`submit --sweep`, hpclaunch/submission/sweep.py). Standard library only: status and jobs stay light."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hpclaunch.errors import HpclaunchError
from hpclaunch.state.registry import JobRecord, get


def label(values: dict[str, Any]) -> str:
    """``train.lr=1e-4 train.seed=1``: an element's values as a person reads them (legends, tables)."""
    return " ".join(f"{k}={v}" for k, v in values.items())


def sweep_id(r: JobRecord) -> str | None:
    """The id of the sweep that `r` is (or is an element of); None for a job that is no sweep's."""
    return str(r.sweep["id"]) if r.sweep and r.sweep.get("id") else None


def is_sweep(r: JobRecord) -> bool:
    """The record of a sweep itself (its elements each have their own, pointing to it)."""
    return sweep_id(r) == r.job_id


def sweep_elements(r: JobRecord) -> list[JobRecord]:
    """A sweep's element records in order (those still recorded); [] for a job that is no sweep."""
    if not is_sweep(r):
        return []
    out = []
    for job_id in (r.sweep or {}).get("elements", []):
        try:
            out.append(get(job_id))
        except HpclaunchError:
            continue
    return out


def values(r: JobRecord) -> str:
    """An element's values in words (`train.lr=1e-4`); "" for a job that is no sweep's element."""
    return label((r.sweep or {}).get("values") or {})


def grouped(records: list[JobRecord]) -> list[tuple[JobRecord, list[JobRecord]]]:
    """Each listed job once, in order: a sweep with its elements under it; an element whose sweep is not
    listed stands alone."""
    listed = {r.job_id for r in records if is_sweep(r)}
    members: dict[str, list[JobRecord]] = defaultdict(list)
    for r in records:
        parent = sweep_id(r)
        if parent and parent != r.job_id and parent in listed:
            members[parent].append(r)
    return [(r, sorted(members.get(r.job_id, []), key=lambda e: int((e.sweep or {}).get("index", 0))))
            for r in records if not (sweep_id(r) in listed and not is_sweep(r))]
