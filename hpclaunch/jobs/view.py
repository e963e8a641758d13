"""One job as `status`, `jobs` and the Python API show it, assembled in one place: the record (a resumed job's
says which job it resumes), the scheduler's status (one scheduler call for every job listed and the newest of
each one's chain), the chain of retries and resumes, why hpclaunch stopped it, the last metrics, the start-up
timeline, provenance in one line, the W&B runs not uploaded yet, the node health verdict and the stragglers; a
sweep with its elements.
`JobView.to_dict()` is `status --json`. Standard library only."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hpclaunch.jobs import sync as wandb_sync
from hpclaunch.jobs.state import retries, statuses, stop_reason
from hpclaunch.report import goodput
from hpclaunch.report.metrics import last_metrics
from hpclaunch.schedulers import JobStatus
from hpclaunch.state import provenance, recoveries, registry, slownodes, stragglers, timeline
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.state.sweeps import is_sweep, sweep_id, values


@dataclass(frozen=True)
class JobView:
    record: registry.JobRecord
    status: JobStatus
    elements: tuple[JobView, ...] = ()  # a sweep's, in order
    retries: tuple[dict[str, Any], ...] = ()  # the jobs that went on from it (retries, resumes), oldest first
    latest: JobStatus | None = None  # the newest one's status
    known: dict[str, JobStatus] = field(default_factory=dict, repr=False, compare=False)  # every status asked for
    local_dir: Path | None = None  # a job submitted over SSH: the local copy its files are read from (jobs/remote.py)

    @property
    def job_id(self) -> str:
        return self.record.job_id

    @property
    def run_dir(self) -> Path:
        """Where the job's files are read: its run directory, or the local copy of one on a login node."""
        return self.local_dir or Path(self.record.run_dir)

    @property
    def is_sweep(self) -> bool:
        return is_sweep(self.record)

    @property
    def sweep_id(self) -> str | None:
        return sweep_id(self.record)

    @property
    def values(self) -> str:
        """A sweep element's values in words (`train.lr=1e-4`)."""
        return values(self.record)

    @property
    def recipe(self) -> str:
        """`gpt2:tiny`: the recipe and its preset."""
        return self.record.recipe + (f":{self.record.preset}" if self.record.preset else "")

    @cached_property
    def last_metrics(self) -> dict[str, Any] | None:
        return last_metrics(self.run_dir)

    @cached_property
    def stop_reason(self) -> str | None:
        return stop_reason(self.record, self.local_dir)

    @cached_property
    def timeline(self) -> list[dict[str, Any]]:
        return timeline.load(RunFiles(self.run_dir))

    @cached_property
    def goodput(self) -> dict[str, Any] | None:
        """The run's goodput ledger (hpclaunch.report.goodput); None before it ran."""
        return goodput.of_run(RunFiles(self.run_dir), nodes=goodput.nodes_of(self.record.layout or ""),
                              spare_nodes=self.record.spare_nodes, restarts=self.timeline)

    @cached_property
    def recoveries(self) -> list[dict[str, Any]]:
        """The relaunches inside the allocation (restarts.max) of its run, oldest first."""
        return recoveries.load(RunFiles(self.run_dir))

    @cached_property
    def provenance(self) -> str | None:
        return provenance.summary(provenance.load(self.run_dir))

    @cached_property
    def wandb(self) -> dict[str, Any] | None:
        return wandb_sync.summary(self.run_dir)

    @cached_property
    def stragglers(self) -> list[dict[str, Any]]:
        """Ranks slower than the profile's stragglers.factor x the median (hpclaunch/state/stragglers.py)."""
        return stragglers.find(RunFiles(self.run_dir))

    @cached_property
    def slow_nodes(self) -> list[dict[str, Any]]:
        """Nodes found slow for stragglers.windows windows: swapped for a spare, or only reported
        (hpclaunch/state/slownodes.py)."""
        return slownodes.load(RunFiles(self.run_dir))

    @cached_property
    def stalls(self) -> list[dict[str, Any]]:
        """A running job's ranks whose progress has stopped, before the watchdog ends them
        (hpclaunch/state/stragglers.py `stalled`)."""
        if self.status.state != "RUNNING" or self.is_sweep:
            return []
        import time

        return stragglers.stalled(RunFiles(self.run_dir), time.time())

    @cached_property
    def health(self) -> dict[str, Any] | None:
        """The newest node health verdict before step 0 (RUN_DIR/health/restart-<R>.json), or None."""
        return health_verdict(RunFiles(self.run_dir))

    def retry_status(self, entry: dict[str, Any]) -> JobStatus | None:
        """The status of the job a retry submitted, where the scheduler was asked about it."""
        return self.known.get(str(entry["to"]))

    def to_dict(self) -> dict[str, Any]:
        """What `status --json` and `jobs --json` print for this job."""
        out = {**asdict(self.record), **asdict(self.status), "last_metrics": self.last_metrics,
               "stop_reason": self.stop_reason, "retries": list(self.retries),
               "latest": asdict(self.latest) if self.latest else None, "timeline": self.timeline,
               "goodput": None if self.is_sweep else self.goodput, "recoveries": self.recoveries,
               "provenance": self.provenance, "wandb": self.wandb, "health": self.health,
               "stragglers": self.stragglers, "slow_nodes": self.slow_nodes, "stalls": self.stalls}
        if self.is_sweep:
            out["elements"] = [e.to_dict() for e in self.elements]
        return out


def health_verdict(run: RunFiles) -> dict[str, Any] | None:
    found = run.health_summaries()
    if not found:
        return None
    try:
        data = json.loads(found[-1].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe_health(found: dict) -> str:
    """node health: 2 node(s) passed before step 0 (restart 0; links 0.61 GB/s), or what failed where. The links'
    figure is the slowest node's (the median of each node's links to its partners)."""
    if not found.get("ok"):
        return "FAILED before step 0: " + "; ".join(
            f"{f.get('host') or '?'} (node {f.get('node')}) {f.get('check')}: {f.get('detail')}"
            for f in found.get("failed", []))
    bw = [c.get("busbw_gbps") for n in found.get("nodes", []) for c in n.get("checks", [])
          if c.get("name") == "allreduce" and c.get("busbw_gbps") is not None]
    extra = f"; links {min(bw):.3g} GB/s" if bw else ""
    return f"{len(found.get('nodes', []))} node(s) passed before step 0 (restart {found.get('restart')}{extra})"


def _view(r: registry.JobRecord, elements: list[registry.JobRecord], found: dict[str, JobStatus],
          dirs: dict[str, Path]) -> JobView:
    chain = tuple(retries(r, dirs.get(r.job_id)))
    latest = found.get(str(chain[-1]["to"])) if chain else None
    return JobView(r, found[r.job_id], tuple(_view(e, [], found, dirs) for e in elements), chain, latest, found,
                   dirs.get(r.job_id))


def views(groups: list[tuple[registry.JobRecord, list[registry.JobRecord]]]) -> list[JobView]:
    """A view of each (record, its sweep elements) pair, with one scheduler call for all of them; a job submitted
    over SSH read from a fresh local copy of its run directory's small files (jobs/remote.py)."""
    from hpclaunch.jobs.remote import local_copy

    records = [r for top, elements in groups for r in (top, *elements)]
    dirs = {r.job_id: d for r in records if r.remote and (d := local_copy(r)) is not None}
    found = statuses(records, dirs)
    return [_view(r, elements, found, dirs) for r, elements in groups]

