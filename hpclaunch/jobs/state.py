"""A recorded job's state as the scheduler and its run directory tell it: one scheduler call per scheduler
kind for many records, the chain of retries and resumes, why hpclaunch stopped it. Used by `status`/`jobs`
and the Python API (hpclaunch/api.py). Standard library only: `status` stays light."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from hpclaunch.schedulers import JobStatus, get_scheduler
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles, read_json_lines


def retries(r: registry.JobRecord, run_dir: Path | None = None) -> list[dict[str, Any]]:
    """The jobs that went on from `r`, oldest first, each from the one before it (RUN_DIR/retries.jsonl):
    resubmissions after node-level failures (submit --retries) and resumes (`hpclaunch resume`, ``"resume":
    true``). `run_dir`: where its files are read (a local copy of a job's over SSH); default its run_dir."""
    chain, current = [], r.job_id
    for entry in read_json_lines(RunFiles(run_dir or Path(r.run_dir)).retries):
        if entry.get("to") and str(entry.get("from")) == current:
            chain.append(entry)
            current = str(entry["to"])
    return chain


def stop_reason(r: registry.JobRecord, run_dir: Path | None = None) -> str | None:
    """Why hpclaunch stopped the job itself (e.g. requeued too often without a new checkpoint)."""
    try:
        return RunFiles(run_dir or Path(r.run_dir)).stop_reason.read_text().strip() or None
    except OSError:
        return None


def statuses(records: list[registry.JobRecord], dirs: dict[str, Path] | None = None) -> dict[str, JobStatus]:
    """One scheduler call per scheduler kind (and login node, for jobs submitted over SSH) for all the records
    (and the newest retry of each). `dirs`: where a job's files are read (`retries`), by job id."""
    by_sched: dict[tuple[str, str], list[str]] = defaultdict(list)
    remotes: dict[str, dict[str, Any] | None] = {}
    out: dict[str, JobStatus] = {}
    for r in records:
        if r.pending:
            out[r.job_id] = JobStatus(r.job_id, "SUBMITTING", reason="hpclaunch is handing it to the scheduler",
                                      source="hpclaunch")
            continue
        where = json.dumps(r.remote, sort_keys=True)
        remotes[where] = r.remote
        by_sched[r.scheduler, where].append(r.job_id)
        chain = retries(r, (dirs or {}).get(r.job_id))
        if chain:
            by_sched[r.scheduler, where].append(str(chain[-1]["to"]))
    for (name, where), ids in by_sched.items():
        out.update(get_scheduler(name, remotes[where]).status(list(dict.fromkeys(ids))))
    return out
