"""`submit`: a recipe (or a script, or a resolved.yaml) on a profile, resolved, rendered and queued; the CLI's
`hpclaunch submit` and the MCP server's submit tool call `submit_request` with their own words."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.api.budget import check_budget
from hpclaunch.api.job import Job
from hpclaunch.api.notes import promise_notes, submit_notes
from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.submission.resolve import CliOverrides


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
    cli = asked(preset=preset, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, partition=partition,
                time=time, name=name, sets=[f"{k}={_set_text(v)}" for k, v in (overrides or {}).items()],
                retries=retries, sbatch=sbatch, launcher=launcher, script_args=script_args, exclude=exclude,
                spare_nodes=spare_nodes, notify=notify)
    items = tuple(f"{k}={','.join(_set_text(v) for v in values)}" for k, values in (sweep or {}).items())
    if sweep is not None and not items:
        raise ConfigError("sweep={}: give at least one key and its values, e.g. sweep={'train.lr': [1e-4, 3e-4]}")
    return submit_request(str(recipe), None if profile is None else str(profile), cli, items, max_parallel,
                          dry_run=dry_run, after=tuple(after), skip_fit_check=skip_fit_check)


def asked(*, sets: Sequence[str] = (), sbatch: Sequence[str] = (), exclude: Sequence[str] = (),
          script_args: Sequence[str] | None = None, **given: Any) -> CliOverrides:
    """What a command line (or a tool call) asked for directly, over the recipe and the profile: --preset,
    --layout, --set KEY=VALUE words, ... (submission/resolve.py's CliOverrides), with the HPCLAUNCH_INJECT of this
    environment (fault injection, docs/resilience.md)."""
    import os

    from hpclaunch.submission.resolve import CliOverrides

    return CliOverrides(sets=tuple(sets), sbatch=tuple(sbatch), exclude=tuple(exclude),
                        script_args=None if script_args is None else tuple(script_args),
                        inject=os.environ.get("HPCLAUNCH_INJECT") or None, **given)


def submit_request(recipe: str, profile: str | None, cli: CliOverrides, sweep: Sequence[str] = (),
                   max_parallel: int | None = None, *, dry_run: bool = False, after: Sequence[str] = (),
                   skip_fit_check: bool = False, remote: str | None = None, agent: bool = False) -> Job:
    """`submit` with the command line's own words (``--set``/``--sweep``/``--after``/``--remote`` strings): what
    `hpclaunch submit` and the MCP submit tool call. `agent`: held to the profile's queue budget for agents
    (agents.max_pending, agents.max_running; api/budget.py) before anything is written."""
    from hpclaunch.submission import overssh
    from hpclaunch.submission import submit as submission

    if remote is not None:
        overssh.parse_target(remote)  # a bad --remote is refused before anything is resolved
    if sweep or max_parallel is not None:
        if remote is not None:
            raise ConfigError("--remote with --sweep: a sweep is not submitted over SSH yet", key="--remote",
                              hint="submit each value with --set, or run hpclaunch on the login node")
        return _submit_sweep(recipe, profile, cli, sweep, max_parallel, dry_run=dry_run, after=after,
                             skip_fit_check=skip_fit_check, agent=agent)
    spec = overssh.with_remote(resolve_spec(recipe, profile, cli), remote)
    if agent and not dry_run:
        check_budget(spec)
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
    notes = (submit_notes(done.spec, after, dry_run, done.warnings) + promise_notes(done.run_dir, dry_run)
             + _expected_start(done.job_id, done.spec))
    return Job(done.job_id, done.run_dir, done.script_path, done.spec, done.warnings, notes=tuple(notes))


def _expected_start(job_id: str | None, spec: JobSpec) -> list[str]:
    """When the scheduler expects a job just queued to start, where it says so (one status call); nothing for a
    dry run, a job already running, or an estimate the scheduler has not made yet."""
    from hpclaunch.core.backends import can

    if job_id is None or not can(spec.profile.scheduler, "estimated_start") or spec.profile.remote is not None:
        return []
    from hpclaunch.errors import CommandError
    from hpclaunch.schedulers import get_scheduler

    try:
        found = get_scheduler(spec.profile.scheduler).status([job_id]).get(job_id)
    except CommandError:
        return []
    if found is None or not found.expected_start:
        return []
    return [f"hpclaunch: {found.state} ({found.reason}); the scheduler expects it to start at {found.expected_start}"]


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
                  skip_fit_check: bool = False, agent: bool = False) -> Job:
    from hpclaunch.config.loader import is_jobspec_file
    from hpclaunch.submission import sweep

    if not items:
        raise ConfigError("--max-parallel goes with --sweep KEY=V1,V2,... (max_parallel= with sweep=)")
    if is_jobspec_file(recipe):
        raise ConfigError(f"--sweep resolves a recipe again for each value; {recipe} is already resolved",
                          hint="give the recipe (e.g. recipes/gpt2) instead")
    profile = _require_profile(profile, recipe, cli)
    elements = sweep.resolve_elements(recipe, profile, cli, sweep.parse_axes(items, cli.sets))
    if agent and not dry_run:
        check_budget(elements[0][1], adding=len(elements) if max_parallel is None else min(max_parallel,
                                                                                             len(elements)))
    if dry_run:
        _check_after(elements[0][1], after)
        done = sweep.dry_run(elements, max_parallel, skip_fit_check=skip_fit_check)
    else:
        done = sweep.submit(elements, max_parallel, after, skip_fit_check=skip_fit_check)
    first = done.elements[0].spec
    notes = submit_notes(first, after, dry_run, done.warnings, per_node=False)
    return Job(done.job_id, done.sweep_dir, done.script_path, first, done.warnings, done, notes=tuple(notes))
