"""submit = dry-run + schedule (rule 3). The Python API and the CLI both come here through hpclaunch/api.py.

The dry-run resolves, checks and renders, and writes the run directory; nothing else. Scheduling
hands the script to the scheduler and records the job. If the scheduler refuses, the run directory
is removed again: nothing is left half-written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission import measured
from hpclaunch.submission.placement import scheduler_reader, with_placement
from hpclaunch.submission.preflight import PLAN_CHECKS, notes, preflight
from hpclaunch.submission.render import render
from hpclaunch.submission.rundir import new_run_dir, recipe_copy, remove_run_dir, with_recipe_copy, write_run_dir
from hpclaunch.submission.space import with_checkpoint_size

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.state import registry


@dataclass(frozen=True)
class Submission:
    spec: JobSpec
    run_dir: Path
    script: str
    job_id: str | None  # None for a dry run
    warnings: tuple[str, ...] = ()  # soft preflight failures of a dry run (assets not staged), notes (run root)

    @property
    def script_path(self) -> Path:
        return RunFiles(self.run_dir).script


def dry_run(spec: JobSpec, *, check_scheduler: bool = False, strict: bool = False,
            skip_fit_check: bool = False) -> Submission:
    """Strict (what submit uses): every preflight check must pass. Not strict (a plain dry run):
    soft checks such as staged assets become `warnings` and the script is still rendered.
    skip_fit_check: no memory-plan check (submit --skip-fit-check)."""
    if check_scheduler:
        from hpclaunch.schedulers import get_scheduler  # a dry run needs no scheduler (nor its imports)

        get_scheduler(spec.profile.scheduler).check_available()
    warnings = preflight(spec, strict=strict, skip=PLAN_CHECKS if skip_fit_check else ()) + notes(spec)
    run_dir = new_run_dir(spec)
    job_spec = with_recipe_copy(with_placement(with_checkpoint_size(spec), scheduler_reader(spec)), run_dir)
    rendered = render(job_spec, run_dir)
    write_run_dir(run_dir, rendered.files, recipe_copy(spec))
    measured.write(job_spec, run_dir)  # the goodput it is promised (report sets the outcome beside it)
    return Submission(job_spec, run_dir, rendered.script, None, tuple(warnings))


def submit(spec: JobSpec, after: Sequence[str] = (), *, skip_fit_check: bool = False,
           resumes: dict[str, Any] | None = None) -> Submission:
    """The record is written (pending, naming the run directory) before the scheduler is asked and gets
    the job id after: a submit killed in between leaves a record that `registry.recover` settles. `after`:
    ``JOB[:ok|any|notok]`` the job waits for (checked before anything is written). `resumes`: the record's
    link to the job this one continues (`hpclaunch resume --from-scratch`)."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.state import registry
    from hpclaunch.submission.provenance import record_submit

    scheduler = get_scheduler(spec.profile.scheduler)
    scheduler.dependency_options(after)
    prepared = dry_run(spec, check_scheduler=True, strict=True, skip_fit_check=skip_fit_check)
    try:
        record_submit(spec, prepared.run_dir)  # the original recipe folder's git state: the job sees a copy
        pending = registry.begin(job_record(spec, "", scheduler.name, prepared.run_dir, resumes=resumes))
    except BaseException:
        remove_run_dir(prepared.run_dir)
        raise
    asked = time.time()
    try:
        job_id = scheduler.submit(prepared.script_path, prepared.run_dir, after)
    except BaseException:
        pending.abandon()
        remove_run_dir(prepared.run_dir)
        raise
    timeline.submitted(prepared.run_dir, job_id, asked)
    pending.complete(job_id)
    return Submission(prepared.spec, prepared.run_dir, prepared.script, job_id, prepared.warnings)


def job_record(spec: JobSpec, job_id: str, scheduler: str, run_dir: Path,
               sweep: dict[str, Any] | None = None, resumes: dict[str, Any] | None = None) -> registry.JobRecord:
    from hpclaunch.state import registry

    return registry.JobRecord(
        job_id=job_id, scheduler=scheduler, profile=spec.profile.name, recipe=spec.recipe.name,
        preset=spec.preset, launcher=spec.recipe.launcher, layout=spec.layout, name=spec.name,
        run_dir=str(run_dir), submitted_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), sweep=sweep, resumes=resumes,
        spare_nodes=spec.spare_nodes,
    )
