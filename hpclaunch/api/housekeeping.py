"""After a job, and around the run directories: `resume` a stopped job from its checkpoint, `clean_find` and
`clean_remove` run directories, `export` a checkpoint as a Hugging Face folder, `export_run` a run's small files
for a comparison elsewhere, `sync_find` and `sync_upload` offline W&B runs, `schema` the JSON Schema of the files.
The work is in hpclaunch/jobs/ and hpclaunch/state/; these are the face of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpclaunch.jobs.clean import RunDir
    from hpclaunch.jobs.export import Exported
    from hpclaunch.jobs.resume import Resumed
    from hpclaunch.jobs.sync import JobRuns, Segment


def resume(job: str, *, from_scratch: bool = False, exclude: Sequence[str] = ()) -> Resumed:
    """JOB (cancelled, failed, timed out, preempted) again from its newest checkpoint as a new job recorded as its
    continuation; refused for a job still queued or running, one that completed, and one with nothing to resume
    from unless `from_scratch`."""
    from hpclaunch.jobs.resume import resume as resume_job

    return resume_job(job, from_scratch=from_scratch, exclude=exclude)


def clean_find(*, dry_runs_only: bool, older_than: str | None) -> list[RunDir]:
    """The run directories `hpclaunch clean` would look at: dry runs' (and orphans), and/or those older than
    `older_than` ("30d", "12h"); each says whether it would be kept, and why."""
    from hpclaunch.jobs import clean

    older_than_s = clean.parse_age(older_than) if older_than is not None else None
    return clean.find(dry_runs_only=dry_runs_only, older_than_s=older_than_s)


def clean_remove(found: Sequence[RunDir]) -> None:
    """Remove each run directory of `found` that is not to be kept."""
    from hpclaunch.jobs import clean

    for d in found:
        if d.keep is None:
            clean.remove(d)


@dataclass(frozen=True)
class CheckpointExport:
    """`export`: the Hugging Face folder written from a job's checkpoint."""

    job_id: str
    done: Exported

    def to_json(self) -> dict[str, Any]:
        d = self.done
        return {"job_id": self.job_id, "folder": str(d.folder), "checkpoint": str(d.checkpoint), "step": d.step,
                "tensors": d.tensors, "params": d.params}


def export(job: str, out: Path | None = None, step: int | None = None, max_shard_size: str = "5GB"
           ) -> CheckpointExport:
    """JOB's checkpoint (`step`, default the newest) as a folder `from_pretrained` loads (default
    RUN_DIR/export/step-<N>); DeepSpeed checkpoints consolidated to fp32."""
    from hpclaunch.jobs.export import checkpoint
    from hpclaunch.jobs.export import export as export_checkpoint
    from hpclaunch.state import registry

    run_dir = Path(registry.get(job).run_dir)
    if out is None:
        _, found = checkpoint(run_dir, step)
        out = run_dir / "export" / f"step-{found:08d}"
    return CheckpointExport(job, export_checkpoint(run_dir, out, step, max_shard_size))


@dataclass(frozen=True)
class RunExport:
    """`export_run`: the archive of a run's metrics, config, provenance and timeline."""

    job_id: str
    archive: Path

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "archive": str(self.archive), "bytes": self.archive.stat().st_size}


def export_run(job: str, out: Path) -> RunExport:
    """Pack JOB's small files (no checkpoints) into `out` (a file, or a folder for RUN.hpclaunch-run.tar.gz)."""
    from hpclaunch.state import registry
    from hpclaunch.state.runarchive import export_run as pack

    return RunExport(job, pack(Path(registry.get(job).run_dir), out))


def sync_find(jobs: Sequence[str]) -> list[JobRuns]:
    """The offline W&B runs of each job (a job id, sweep id or run directory); an error when none has any."""
    from hpclaunch.jobs import sync

    found = sync.find(list(jobs))
    sync.check_found(found)
    return found


def sync_upload(found: list[JobRuns], *, include_synced: bool = False, project: str | None = None,
                entity: str | None = None) -> list[Segment]:
    """Upload what `sync_find` found (W&B's own uploader); the runs uploaded."""
    from hpclaunch.jobs import sync

    return sync.upload(found, include_synced=include_synced, project=project, entity=entity)


@dataclass(frozen=True)
class Suspect:
    """A node blamed for a failure, left out of submissions until `until` (epoch seconds): why, by which job, of
    which scheduler, and the evidence."""

    node: str
    until: float
    reason: str
    job: str
    scheduler: str | None
    evidence: str | None


def suspects() -> list[Suspect]:
    """The nodes blamed for recent failures that submissions leave out now (`hpclaunch suspects`)."""
    from hpclaunch.state import suspects as found

    return [Suspect(node, float(info["until"]), str(info.get("reason") or ""), str(info.get("job") or ""),
                    info.get("scheduler"), info.get("evidence")) for node, info in sorted(found.load().items())]


def clear_suspects(nodes: Sequence[str] = ()) -> list[str]:
    """Forget these suspects (none named: every one); the nodes forgotten. A node named that is no suspect is
    the user's error."""
    from hpclaunch.errors import NotFoundError
    from hpclaunch.state import suspects as found

    known = found.load()
    for node in nodes:
        if node not in known:
            raise NotFoundError("suspect node", node, known, hint="`hpclaunch suspects` lists them")
    return found.clear(nodes)


def schema(kind: str) -> str:
    """The JSON Schema of a profile or recipe file, as text (for an editor's YAML language server)."""
    from hpclaunch.config.fileschema import schema_text

    return schema_text(kind)
