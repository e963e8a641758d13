"""The Python API: ``hpclaunch.submit(...)`` returns a `Job`; ``hpclaunch.job(ID)`` finds a recorded one.

The CLI's ``submit``, ``status`` and ``cancel`` call into this module (``submit_request``, `Job`), so a
job submitted from Python and one submitted from a shell go through one code path. Every failure is an
`HpclaunchError`. See docs/python-api.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.jobs.cancel import Cancelled
    from hpclaunch.schedulers.base import JobStatus
    from hpclaunch.state.registry import JobRecord
    from hpclaunch.submission.resolve import CliOverrides
    from hpclaunch.submission.sweep import SweepSubmission

UNKNOWN_LIMIT = 10  # polls in a row that the scheduler does not know the job before `wait` gives up


class JobTimeout(HpclaunchError):
    """`Job.wait(timeout=...)` ran out of time; the job still runs."""

    exit_code = 1


@dataclass(frozen=True)
class Job:
    """A submitted job (or sweep, or a dry run's run directory). `spec` and `warnings` are known for a job
    submitted in this process; `hpclaunch.job(ID)` gives one from its record."""

    job_id: str | None  # None for a dry run
    run_dir: Path  # a sweep's folder for a sweep
    script: Path
    spec: JobSpec | None = field(default=None, repr=False)
    warnings: tuple[str, ...] = ()
    sweep: SweepSubmission | None = field(default=None, repr=False)

    # --- the job's record and state
    def _record(self) -> JobRecord:
        from hpclaunch.state import registry

        if self.job_id is None:
            raise HpclaunchError(f"a dry run submitted nothing (run directory {self.run_dir})",
                                 hint="submit it: hpclaunch.submit(..., dry_run=False)")
        return registry.get(self.job_id)

    @property
    def is_sweep(self) -> bool:
        from hpclaunch.state.sweeps import is_sweep

        return self.sweep is not None or (self.job_id is not None and is_sweep(self._record()))

    @property
    def elements(self) -> list[Job]:
        """A sweep's elements, in order ([] for a job that is no sweep)."""
        from hpclaunch.state.sweeps import sweep_elements

        if self.job_id is None:
            return []
        return [_from_record(r) for r in sweep_elements(self._record())]

    def status(self) -> JobStatus:
        """The scheduler's view now: state (PENDING, RUNNING, COMPLETED, FAILED, ...), reason, exit code,
        nodes, elapsed."""
        from hpclaunch.jobs.state import statuses

        record = self._record()
        return statuses([record])[record.job_id]

    def wait(self, timeout: float | None = None, *, poll: float = 2.0) -> JobStatus:
        """Block until the job (every element of a sweep) has ended; its final status. It does not raise for a
        failed job: look at ``.state``. Raises JobTimeout after `timeout` seconds, JobLost when the scheduler
        stops knowing it."""
        from hpclaunch.jobs.state import statuses
        from hpclaunch.logs.follow import JobLost

        record = self._record()
        watched = [record, *[e._record() for e in self.elements]]
        deadline = None if timeout is None else time.monotonic() + timeout
        unknown = 0
        while True:
            found = statuses(watched)
            unknown = unknown + 1 if any(s.state == "UNKNOWN" for s in found.values()) else 0
            if unknown >= UNKNOWN_LIMIT:
                raise JobLost(f"job {record.job_id}: the scheduler no longer knows it ({unknown} checks in a row)",
                              hint=f"`hpclaunch status {record.job_id}` shows what is known")
            if all(found[r.job_id].finished for r in watched[1:] or watched):
                return found[record.job_id] if len(watched) == 1 else _sweep_status(record.job_id, found, watched)
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(f"job {record.job_id} is still {found[record.job_id].state} after {timeout:g} s",
                                 hint="wait longer, or job.cancel()")
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def cancel(self) -> Cancelled:
        """Cancel the job (every step and the batch script; a sweep: every element), as `hpclaunch cancel`
        does: a job that has already ended is left alone, and the result says how and when it ended."""
        from hpclaunch.jobs.cancel import cancel

        (done,) = cancel([self._record().job_id])
        return done

    def resume(self, *, from_scratch: bool = False, exclude: Sequence[str] = ()) -> Job:
        """The job, stopped (cancelled, failed, timed out), again from its newest checkpoint as a new job recorded
        as its continuation, as `hpclaunch resume` does (hpclaunch/jobs/resume.py); the new job."""
        from hpclaunch.jobs.resume import resume

        done = resume(self._record().job_id, from_scratch=from_scratch, exclude=exclude)
        return Job(done.job_id, done.run_dir, done.script)

    # --- what the job wrote
    def logs(self, rank: int | None = None, *, tail: int | None = None) -> str:
        """The rank logs merged (each line prefixed with ``[rank<R>]``, every restart in order), then the job
        script's own output; with `rank`, only that rank's lines."""
        from hpclaunch.logs.read import batch_lines, merged

        files = RunFiles(self.run_dir)
        lines = [line.prefixed() for line in merged(files.rank_logs(rank=rank), tail=tail)]
        if rank is None:
            lines += [line.prefixed() for line in batch_lines(files.job_outputs(), tail=tail)]
        return "\n".join(lines) + ("\n" if lines else "")

    @overload
    def metrics(self, rank: int = 0, *, kind: Literal["train", "eval", "all"] = "train",
                as_frame: Literal[False] = False) -> list[dict[str, Any]]: ...

    @overload
    def metrics(self, rank: int = 0, *, kind: Literal["train", "eval", "all"] = "train",
                as_frame: Literal[True]) -> Any: ...

    def metrics(self, rank: int = 0, *, kind: Literal["train", "eval", "all"] = "train",
                as_frame: bool = False) -> list[dict[str, Any]] | Any:
        """The metrics `rank` wrote: training records (one per step; the last of a step written twice across a
        requeue wins), eval records, or all; a pandas DataFrame with ``as_frame=True``."""
        from hpclaunch.report.metrics import load_run

        m = load_run(self.run_dir, self.job_id or "(dry run)", rank)
        records = {"train": m.train, "eval": m.evals, "all": [*m.train, *m.evals]}[kind]
        if not as_frame:
            return records
        try:
            import pandas
        except ImportError:
            raise HpclaunchError("metrics(as_frame=True) needs pandas, which is not installed",
                                 hint="pip install pandas, or call metrics() for a list of dicts") from None
        return pandas.DataFrame(records)

    def provenance(self) -> dict[str, Any]:
        """What the run ran with (RUN_DIR/provenance.json; {} before anything wrote it)."""
        from hpclaunch.state.provenance import load

        return load(self.run_dir)

    def describe(self) -> dict[str, Any]:
        """Everything `hpclaunch status JOB --json` prints (record, status, reason in words, retries, last
        metrics, timeline, provenance line, W&B; a sweep's elements): one view, shared with the CLI."""
        from hpclaunch.jobs.view import views
        from hpclaunch.state.sweeps import sweep_elements

        record = self._record()
        (view,) = views([(record, sweep_elements(record))])
        return view.to_dict()


def _sweep_status(sweep_id: str, found: dict[str, JobStatus], watched: list[JobRecord]) -> JobStatus:
    """A sweep's status once every element has ended: COMPLETED when all did, else the first other state."""
    from hpclaunch.schedulers.base import JobStatus

    bad = [found[r.job_id] for r in watched[1:] if found[r.job_id].state != "COMPLETED"]
    return JobStatus(sweep_id, bad[0].state if bad else "COMPLETED", exit_code=bad[0].exit_code if bad else None,
                     source=found[watched[0].job_id].source)


def _from_record(record: JobRecord) -> Job:
    from hpclaunch.state.runfiles import SweepFiles
    from hpclaunch.state.sweeps import is_sweep

    run_dir = Path(record.run_dir)
    script = SweepFiles(run_dir).script if is_sweep(record) else RunFiles(run_dir).script
    return Job(record.job_id, run_dir, script)


def job(job_id: str) -> Job:
    """A recorded job (or sweep, or sweep element) by its id, as `hpclaunch status` shows it."""
    from hpclaunch.state import registry

    return _from_record(registry.get(job_id))


def _set_text(value: object) -> str:
    """A Python value as ``--set KEY=VALUE`` reads it (YAML): strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def submit(recipe: str | Path, profile: str | Path | None = None, *, preset: str | None = None,
           layout: str | None = None, overrides: Mapping[str, object] | None = None,
           sweep: Mapping[str, Sequence[object]] | None = None, max_parallel: int | None = None,
           dry_run: bool = False, nodes: int | None = None, gpus_per_node: int | None = None,
           partition: str | None = None, time: str | None = None, name: str | None = None,
           retries: int = 0, after: Sequence[str] = (), sbatch: Sequence[str] = (),
           skip_fit_check: bool = False, launcher: str | None = None,
           script_args: Sequence[str] | None = None, exclude: Sequence[str] = (),
           spare_nodes: int | None = None, notify: str | None = None) -> Job:
    """Resolve `recipe` on `profile` as `hpclaunch submit` does and submit it (or, with ``dry_run``, only
    write its run directory). `overrides` are ``--set`` keys (``{"train.lr": 3e-4}``); `sweep` runs one job
    array over every combination (``{"train.lr": [1e-4, 3e-4]}``), at most `max_parallel` at a time.
    `after` (``["12345:ok"]``), `sbatch` (``["mem=64G", "exclusive"]``), `exclude` (``["node7"]``) and
    `skip_fit_check` are the ``--after``, ``--sbatch``, ``--exclude`` and ``--skip-fit-check`` of the command
    line, `spare_nodes` its ``--spare-nodes``. `recipe` may be a Python script (``"train.py"``), run under
    `launcher` (torchrun, the default, or deepspeed) with `script_args` as its own arguments
    (``submit train.py --launcher torchrun -- ARGS``)."""
    import os

    from hpclaunch.submission.resolve import CliOverrides

    cli = CliOverrides(preset=preset, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, partition=partition,
                       time=time, name=name, sets=tuple(f"{k}={_set_text(v)}" for k, v in (overrides or {}).items()),
                       retries=retries, inject=os.environ.get("HPCLAUNCH_INJECT") or None, sbatch=tuple(sbatch),
                       launcher=launcher, script_args=None if script_args is None else tuple(script_args),
                       exclude=tuple(exclude), spare_nodes=spare_nodes, notify=notify)
    items = tuple(f"{k}={','.join(_set_text(v) for v in values)}" for k, values in (sweep or {}).items())
    if sweep is not None and not items:
        raise ConfigError("sweep={}: give at least one key and its values, e.g. sweep={'train.lr': [1e-4, 3e-4]}")
    return submit_request(str(recipe), None if profile is None else str(profile), cli, items, max_parallel,
                          dry_run=dry_run, after=tuple(after), skip_fit_check=skip_fit_check)


def submit_request(recipe: str, profile: str | None, cli: CliOverrides, sweep: Sequence[str] = (),
                   max_parallel: int | None = None, *, dry_run: bool = False, after: Sequence[str] = (),
                   skip_fit_check: bool = False, remote: str | None = None) -> Job:
    """`submit` with the command line's own words (``--set``/``--sweep``/``--after``/``--remote`` strings): what
    `hpclaunch submit` calls."""
    from hpclaunch.submission import overssh
    from hpclaunch.submission import submit as submission

    if remote is not None:
        overssh.parse_target(remote)  # a bad --remote is refused before anything is resolved
    if sweep or max_parallel is not None:
        if remote is not None:
            raise ConfigError("--remote with --sweep: a sweep is not submitted over SSH yet", key="--remote",
                              hint="submit each value with --set, or run hpclaunch on the login node")
        return _submit_sweep(recipe, profile, cli, sweep, max_parallel, dry_run=dry_run, after=after,
                             skip_fit_check=skip_fit_check)
    spec = overssh.with_remote(resolve_spec(recipe, profile, cli), remote)
    where = overssh.target(spec)
    if where is not None:
        _check_after(spec, after)
        done = (overssh.dry_run(spec, skip_fit_check=skip_fit_check) if dry_run
                else overssh.submit(spec, where, after, skip_fit_check=skip_fit_check))
    elif dry_run:
        _check_after(spec, after)
        done = submission.dry_run(spec, skip_fit_check=skip_fit_check)
    else:
        done = submission.submit(spec, after, skip_fit_check=skip_fit_check)
    return Job(done.job_id, done.run_dir, done.script_path, done.spec, done.warnings)


def resolve_spec(recipe: str, profile: str | None, cli: CliOverrides) -> JobSpec:
    """The JobSpec of a recipe on a profile, or of a resolved.yaml with the flags over it (submit, plan)."""
    from hpclaunch.config.loader import is_jobspec_file

    if is_jobspec_file(recipe):
        from hpclaunch.submission.resolve import resolve_again

        # validated exactly as a fresh resolve; --layout, --set, ... apply over what it recorded
        return resolve_again(recipe, cli, profile)
    from hpclaunch.submission.resolve import resolve

    return resolve(recipe, _require_profile(profile, recipe, cli), cli)


def _require_profile(profile: str | None, recipe: str, cli: CliOverrides) -> str:
    """`profile`, else the user's default_profile (hpclaunch/config/userconfig.py). Without either, a `recipe`
    that is not there is said first (no such file, script or recipe): no profile would help it."""
    if profile:
        return profile
    from hpclaunch.config import userconfig

    default = userconfig.default_profile()
    if not default:
        from hpclaunch.submission.resolve import recipe_source

        recipe_source(recipe, cli)
        raise ConfigError("--profile is required (the profile= argument in Python)",
                          hint=f"see `hpclaunch profiles list`, or set `default_profile: NAME` in "
                               f"{userconfig.config_file()}")
    from hpclaunch.config.loader import find_profile
    from hpclaunch.errors import NotFoundError

    try:
        find_profile(default)
    except NotFoundError as exc:
        raise ConfigError(f"no such profile: {default!r}", file=str(userconfig.config_file()), key="default_profile",
                          hint=f"name one of `hpclaunch profiles list` or a profile file ({exc.message})") from None
    return default


def _check_after(spec: JobSpec, after: Sequence[str]) -> None:
    """A dry run refuses an `after` its scheduler cannot take, as a submit would, before anything is written."""
    if after:
        from hpclaunch.schedulers import get_scheduler

        get_scheduler(spec.profile.scheduler).dependency_options(after)


def _submit_sweep(recipe: str, profile: str | None, cli: CliOverrides, items: Sequence[str],
                  max_parallel: int | None, *, dry_run: bool, after: Sequence[str] = (),
                  skip_fit_check: bool = False) -> Job:
    from hpclaunch.config.loader import is_jobspec_file
    from hpclaunch.submission import sweep

    if not items:
        raise ConfigError("--max-parallel goes with --sweep KEY=V1,V2,... (max_parallel= with sweep=)")
    if is_jobspec_file(recipe):
        raise ConfigError(f"--sweep resolves a recipe again for each value; {recipe} is already resolved",
                          hint="give the recipe (e.g. recipes/gpt2) instead")
    profile = _require_profile(profile, recipe, cli)
    elements = sweep.resolve_elements(recipe, profile, cli, sweep.parse_axes(items, cli.sets))
    if dry_run:
        _check_after(elements[0][1], after)
        done = sweep.dry_run(elements, max_parallel, skip_fit_check=skip_fit_check)
    else:
        done = sweep.submit(elements, max_parallel, after, skip_fit_check=skip_fit_check)
    return Job(done.job_id, done.sweep_dir, done.script_path, done.elements[0].spec, done.warnings, done)
