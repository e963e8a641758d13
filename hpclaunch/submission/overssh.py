"""submit from a laptop (docs/remote.md): a profile with `remote:` (or `submit --remote user@host[:port]`) renders
the run directory here, in a staging folder, copies it to the login node as one tar stream over the SSH connection
the scheduler's commands use too, and queues it there. The run directory lives on the cluster (the profile's
run_root there; default ~/.hpclaunch/runs of the login user); the staging folder is removed.

The login is checked before anything is written: an unreachable host, an unknown host key or a missing sbatch is an
error with nothing written, on either side. A refused sbatch removes the copied run directory again."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.base import replace
from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.remote import SshHost, Target, login_path, parse_target
from hpclaunch.errors import ConfigError
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission.placement import with_placement
from hpclaunch.submission.preflight import ASSET_CHECKS, PLAN_CHECKS, preflight
from hpclaunch.submission.render import render
from hpclaunch.submission.rundir import recipe_copy, remove_run_dir, with_recipe_copy, write_run_dir
from hpclaunch.submission.space import with_checkpoint_size

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile
    from hpclaunch.schedulers.base import Topology
    from hpclaunch.submission.submit import Submission

DEFAULT_REMOTE_ROOT = "~/.hpclaunch/runs"


def target(spec: JobSpec) -> Target | None:
    """The login node of the spec's profile (`remote:`), None for a profile without one."""
    return profile_target(spec.profile)


def profile_target(profile: Profile) -> Target | None:
    """The login node of a profile (`remote:`), None for a profile without one."""
    r = profile.remote
    if r is None:
        return None
    return Target(host=r.host, user=r.user, port=r.port, identity=r.identity, known_hosts=r.known_hosts)


def with_remote(spec: JobSpec, text: str | None) -> JobSpec:
    """`submit --remote user@host[:port]` over the profile's remote: (whose identity and known_hosts it keeps)."""
    if not text:
        return spec
    from hpclaunch.config.profile import RemoteConfig

    t = parse_target(text)
    old = spec.profile.remote
    remote = RemoteConfig(host=t.host, user=t.user or (old.user if old else None), port=t.port,
                          identity=old.identity if old else None, known_hosts=old.known_hosts if old else None)
    return replace(spec, profile=replace(spec.profile, remote=remote))


def remote_run_dir(spec: JobSpec, home: str) -> Path:
    """RUN_ROOT/<date>-<time>-<name>-<random> on the login node: the profile's run_root (absolute, or from `~`, the
    login user's `home`), else ~/.hpclaunch/runs there."""
    root = spec.profile.run_root or DEFAULT_REMOTE_ROOT
    there = login_path(root, home)
    if there is None:
        raise ConfigError(f"{root!r}: the run root of a profile with remote: is a path on the login node: absolute "
                          "or starting with ~/", file=f"profile {spec.profile.name}", key="run_root",
                          hint="e.g. run_root: /scratch/$USER/runs written out, or ~/hpclaunch/runs")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(there) / f"{stamp}-{spec.name}-{os.urandom(3).hex()}"


def _staging(run_dir: Path) -> Path:
    return hpclaunch_home() / "staging" / run_dir.name


def prepare(spec: JobSpec, home: str, *, strict: bool, skip_fit_check: bool,
            host: SshHost | None = None) -> tuple[Submission, Path]:
    """Check (the staged assets in the login node's store, where `host` is given), render for the cluster's run
    directory and write it into a local staging folder: (the submission, whose run_dir is the cluster's, the
    staging folder)."""
    from hpclaunch.submission.remoteassets import check_assets
    from hpclaunch.submission.submit import Submission

    warnings = preflight(spec, strict=strict, skip=(*ASSET_CHECKS, *(PLAN_CHECKS if skip_fit_check else ())))
    if host is not None:
        check_assets(spec, host, home)
    else:
        warnings.append("the staged assets are checked in the login node's store when the job is submitted")
    run_dir = remote_run_dir(spec, home)
    read = None if host is None else _reader(spec, host)
    job_spec = with_recipe_copy(with_placement(with_checkpoint_size(spec), read), run_dir)
    rendered = render(job_spec, run_dir)
    staging = _staging(run_dir)
    write_run_dir(staging, rendered.files, recipe_copy(spec))
    return Submission(job_spec, run_dir, rendered.script, None, tuple(warnings)), staging


def _reader(spec: JobSpec, host: SshHost) -> Callable[[], Topology | None]:
    """The cluster's topology, asked on the login node (submission/placement.py reads it only when needed)."""
    def read() -> Topology | None:
        from hpclaunch.schedulers import get_scheduler

        return get_scheduler(spec.profile.scheduler, host.target.to_dict()).topology(spec.partition)

    return read


def dry_run(spec: JobSpec, *, skip_fit_check: bool = False) -> Submission:
    """The run directory as it would be copied, kept in the staging folder here; the login node is not asked
    (its home is written `~`)."""
    from hpclaunch.submission.submit import Submission

    prepared, staging = prepare(spec, "~", strict=False, skip_fit_check=skip_fit_check)
    return Submission(prepared.spec, staging, prepared.script, None, prepared.warnings)


def submit(spec: JobSpec, where: Target, after: Sequence[str] = (), *, skip_fit_check: bool = False,
           resumes: dict[str, Any] | None = None) -> Submission:
    """Log in, write the run directory here, copy it to the login node, record the job (pending) and queue it."""
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.state import registry
    from hpclaunch.submission.provenance import record_submit
    from hpclaunch.submission.submit import Submission, job_record

    host = SshHost(where)
    scheduler = get_scheduler(spec.profile.scheduler, where.to_dict())
    scheduler.dependency_options(after)
    scheduler.check_available()  # logs in: an unreachable host or unknown host key stops here
    prepared, staging = prepare(spec, host.home(), strict=True, skip_fit_check=skip_fit_check, host=host)
    run_dir = prepared.run_dir
    try:
        record_submit(spec, staging)
        host.put_dir(staging, run_dir)
    finally:
        remove_run_dir(staging)
    try:
        record = replace_remote(job_record(spec, "", scheduler.name, run_dir, resumes=resumes), where)
        pending = registry.begin(record)
    except BaseException:
        host.run(["rm", "-rf", "--", str(run_dir)], check=False)
        raise
    asked = time.time()
    try:
        job_id = scheduler.submit(RunFiles(run_dir).script, run_dir, after)
    except BaseException:
        pending.abandon()
        host.run(["rm", "-rf", "--", str(run_dir)], check=False)
        raise
    stamp = timeline.line("submitted", 0, job_id, asked)
    host.run(["sh", "-c", f"cat >> {shlex.quote(str(RunFiles(run_dir).timeline))}"], input=stamp, check=False)
    pending.complete(job_id)
    return Submission(prepared.spec, run_dir, prepared.script, job_id, prepared.warnings)


def replace_remote(record: Any, where: Target) -> Any:
    """The job record with its login node (never a password nor a key: the identity is a path)."""
    import dataclasses

    return dataclasses.replace(record, remote=where.to_dict())

