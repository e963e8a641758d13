"""slurm-rest: Slurm through slurmrestd's REST API, for a submitting machine without Slurm's commands (a notebook, a
gateway) that shares the cluster's filesystem. The job script is the Slurm scheduler's (the same options, template
parts and context; compute nodes keep srun and scontrol); only the submitting side differs: submit, status, cancel,
sweeps and accounting are HTTP requests with a JWT (connection.py) in the newest OpenAPI version both sides speak
(versions.py: v0.0.38 for Slurm 22.05, v0.0.45 for 26.05; asked once per slurmrestd and command), the ``#SBATCH``
lines become the job description's fields (jobdesc.py, typed.py), and the answers are read as the Slurm scheduler
reads squeue/sacct's JSON (answers.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.walltime import parse_time
from hpclaunch.errors import CommandError, HpclaunchError
from hpclaunch.schedulers.base import Check, JobStatus
from hpclaunch.schedulers.slurm.options import dependency_option
from hpclaunch.schedulers.slurm.scheduler import SlurmScheduler, exclude_option
from hpclaunch.schedulers.slurm_rest import answers, jobdesc
from hpclaunch.schedulers.slurm_rest.connection import (
    INFORMATIONAL,
    MEMO,
    Connection,
    RestError,
    check_env,
    errors,
)
from hpclaunch.schedulers.slurm_rest.versions import negotiate, span
from hpclaunch.state.runfiles import RunFiles, SweepFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile

# A REST job starts with the user's login environment on the cluster (Slurm's --get-user-env: HOME, USER, the
# module system), not the submitting machine's (which may not be the cluster's), plus the system PATH (the job
# script sets up modules and Python itself) and hpclaunch's own HPCLAUNCH_* settings from here.
USER_ENV = "--get-user-env"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV_PREFIX = "HPCLAUNCH_"


def job_environment() -> dict[str, str]:
    """What every slurm-rest job gets from here; ``--sbatch export=NAME,...`` (sbatch's --export) adds more."""
    return {"PATH": BASE_PATH, **{k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}}


def _without_batch_signal(options: list[str], time_limit: str, lead: int) -> tuple[list[str], int | None]:
    """The #SBATCH options less the Slurm scheduler's ``--signal=B:USR1@LEAD`` (slurmrestd refuses B:), and after
    how many seconds the job script sends itself that USR1 instead (None: it asked for none)."""
    batch_signal = f"--signal=B:USR1@{lead}"  # what the Slurm scheduler asks for (sbatch_options)
    if batch_signal not in options:
        return options, None
    return [o for o in options if o != batch_signal], max(parse_time(time_limit) - lead, 0)


def _profile_env(run_dir: Path) -> dict[str, str]:
    """The profile's env: of the job spec the run directory holds (resolved.yaml), {} when unreadable."""
    import yaml

    try:
        data = yaml.safe_load(RunFiles(run_dir).resolved.read_text(encoding="utf-8"))
        env = data["profile"]["env"] or {}
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return {}
    return {str(k): str(v) for k, v in env.items()}


def _memo(run_dir: Path) -> dict[str, Any]:
    try:
        found = json.loads((RunFiles(run_dir).scheduler_state(SlurmRestScheduler.name) / MEMO).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _job_connection(job_id: str) -> Connection:
    """The connection a job was submitted through (its run directory's memo), else today's settings."""
    from hpclaunch.state import registry

    try:
        run_dir = Path(registry.get(job_id).run_dir)
    except HpclaunchError:
        return Connection.find()
    memo = _memo(run_dir)
    return Connection.find(None if memo else _profile_env(run_dir), memo)


def _bases(ids: Iterable[str]) -> list[str]:
    """The job ids to ask slurmrestd for: an array's own id for its tasks (12345_3 -> 12345)."""
    return list(dict.fromkeys(i.split("_")[0] for i in ids))


def _exit_status(found: JobStatus) -> int:
    """A finished job's exit status as a shell gives it: the code, else 128 + the signal, else 1 if it failed."""
    code, _, signal = (found.exit_code or "").partition(":")
    if code.isdigit() and int(code):
        return int(code)
    if signal.isdigit() and int(signal):
        return 128 + int(signal)
    return 0 if found.state == "COMPLETED" else 1


class SlurmRestScheduler(SlurmScheduler):
    name = "slurm-rest"  # no "ssh" capability: it speaks HTTP to slurmrestd

    def parse_options(self, options: Sequence[str]) -> dict[str, str | None]:
        parsed = super().parse_options(options)
        jobdesc.check_options(parsed)
        return parsed

    def check_available(self) -> None:
        return None  # nothing to find on this machine; the connection is asked at submit

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        check_env(spec.profile.env, "env")
        check_env(spec.recipe.env, "recipe.env")
        context = super().script_context(spec, run_dir)
        context["options"], context["warn_after"] = _without_batch_signal(context["options"], spec.time,
                                                                               spec.checkpoint.lead_time)
        jobdesc.check_options(jobdesc.split(o)[0] for o in context["options"])
        return context

    def array_context(self, specs: Sequence[JobSpec], sweep_dir: Path, max_parallel: int | None) -> dict[str, Any]:
        context = super().array_context(specs, sweep_dir, max_parallel)
        context["options"] = _without_batch_signal(context["options"], specs[0].time,
                                                   specs[0].checkpoint.lead_time)[0]
        return context

    # --- submit ---------------------------------------------------------------------------------------------

    def _submit(self, script: Path, cwd: Path, options: Sequence[str], connection: Connection,
                memo_dirs: Sequence[Path] = ()) -> str:
        text = script.read_text(encoding="utf-8")
        api = negotiate(connection)
        job = jobdesc.describe([USER_ENV, *jobdesc.script_options(text), *options], job_environment(), str(cwd),
                               os.environ, api.slurm)
        path = api.ctld("job/submit")
        answer = connection.request("POST", path, {"script": text, "job": job})
        job_id = str(answer.get("job_id", ""))
        if not job_id.isdigit():
            raise CommandError(f"slurmrestd answered POST {connection.url}{path} without a job id")
        refused = errors(answer, skip=INFORMATIONAL)
        if refused:  # queued, but part of the description was not read (26.05): not the job that was asked for
            connection.request("DELETE", api.ctld(f"job/{job_id}"), missing_ok=True)
            raise CommandError(f"slurmrestd queued job {job_id} from POST {connection.url}{path} but did not read all "
                               f"of its description: {'; '.join(refused)}; the job was cancelled",
                               hint="the message above is slurmrestd's own: change or drop that #SBATCH option")
        for folder in memo_dirs:  # queued now: a memo that cannot be written must not fail the submit
            state = RunFiles(folder).scheduler_state(self.name)
            try:
                state.mkdir(parents=True, exist_ok=True)
                (state / MEMO).write_text(connection.memo(), encoding="utf-8")
            except OSError:
                pass
        return job_id

    def submit(self, script: Path, run_dir: Path, after: Sequence[str] = ()) -> str:
        options = [*dependency_option(after), *exclude_option(script)]
        return self._submit(script, run_dir, options, Connection.find(_profile_env(run_dir)), [run_dir])

    def resubmit(self, script: Path, run_dir: Path, *, restart: int, exclude: Sequence[str] = ()) -> str:
        """`hpclaunch resume` through slurmrestd (SlurmScheduler's would call sbatch here, where it may not be, and
        pass this environment, token included, on to the job)."""
        self.forget_requeues(run_dir)
        options = [f"--export=HPCLAUNCH_RESTART_BASE={restart},HPCLAUNCH_RETRY=0", *exclude_option(script, exclude)]
        return self._submit(script, run_dir, options, Connection.find(_profile_env(run_dir)), [run_dir])

    def submit_array(self, script: Path, sweep_dir: Path, count: int, max_parallel: int | None,
                     after: Sequence[str] = ()) -> str:
        elements = [SweepFiles(sweep_dir).element(i) for i in range(count)]
        options = [*dependency_option(after), *exclude_option(script)]
        return self._submit(script, sweep_dir, options, Connection.find(_profile_env(elements[0])),
                            [sweep_dir, *elements])

    # --- status, cancel, accounting -------------------------------------------------------------------------

    def _ask(self, connection: Connection, ids: Sequence[str]) -> dict[str, JobStatus]:
        """slurmctld's view (GET job/ID), then slurmdbd's for what it no longer knows or is completing."""
        from hpclaunch.schedulers.slurm import output

        api = negotiate(connection)
        jobs = [j for base in _bases(ids)
                for j in output.parse_squeue_json(connection.request("GET", api.ctld(f"job/{base}"), missing_ok=True))]
        found = output.select(jobs, ids, "slurmrestd")
        missing = [j for j in ids if j not in found or found[j].state == "COMPLETING"]
        if missing and api.slurmdb:
            try:
                done = [j for base in _bases(missing) for j in output.parse_sacct_json(
                    connection.request("GET", f"/slurmdb/{api.slurmdb}/job/{base}", missing_ok=True))]
            except RestError as exc:
                if exc.refused_token:
                    raise
                done = []  # no accounting: what slurmctld said stands
            found.update(output.select(done, missing, "slurmdbd"))
        return found

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        ids = [str(j) for j in job_ids]
        groups: dict[Connection, list[str]] = {}
        for jid in ids:
            groups.setdefault(_job_connection(jid), []).append(jid)
        found: dict[str, JobStatus] = {}
        for connection, group in groups.items():
            found.update(self._ask(connection, group))
        for jid in ids:
            found.setdefault(jid, JobStatus(jid, "UNKNOWN", source="none"))
        return found

    def cancel(self, job_id: str) -> None:
        connection = _job_connection(job_id)
        connection.request("DELETE", negotiate(connection).ctld(f"job/{job_id}"))

    def usage(self, job_id: str) -> dict[str, Any] | None:
        """From slurmdbd's record of the job and its steps; None with accounting disabled (or no slurmdbd paths)."""
        connection = _job_connection(job_id)
        path = negotiate(connection).db(f"job/{job_id}")
        if path is None:
            return None
        try:
            answer = connection.request("GET", path, missing_ok=True)
        except RestError as exc:
            if exc.refused_token:
                raise
            return None
        return answers.usage(answer, job_id)

    def find_job(self, run_dir: Path) -> str | None:
        """From the job's output file (it started), else the job slurmctld runs in `run_dir` (still queued)."""
        from hpclaunch.state.runfiles import job_output_id

        for out in reversed(RunFiles(run_dir).job_outputs()):
            job_id = job_output_id(out.name)
            if job_id and job_id.isdigit():
                return job_id
        connection = Connection.find(_profile_env(run_dir), _memo(run_dir))
        return answers.job_in(connection.request("GET", negotiate(connection).ctld("jobs")), run_dir)

    # --- profiles check -------------------------------------------------------------------------------------

    def check_profile(self, profile: Profile) -> list[Check]:
        connection = Connection.find(profile.env)
        try:
            api = negotiate(connection)
            answer = connection.request("GET", api.ctld("partitions"))
        except CommandError as exc:
            return [Check("slurmrestd", False, exc.message, exc.hint or "")]
        served = f"; it serves {span(api.served)}" if len(api.served) > 1 else ""
        checks = [Check("slurmrestd", True, f"answers at {connection.url} ({answers.release(answer, api)}{served})")]
        return checks + answers.partition_checks(answer, profile)

    def run_probe(self, script: Path, output: Path, profile: Profile, *, timeout: float) -> int:
        """The probe as one job of 1 node, 1 task (1 device where it has a GRES), followed until it ends."""
        part = profile.partitions[profile.default_partition]
        options = [f"--partition={profile.default_partition}", "--nodes=1", "--ntasks=1", "--cpus-per-task=1",
                   "--time=00:10:00", "--job-name=hpclaunch-check", f"--output={output}",
                   *([f"--gres={part.gres}:1"] if part.gres else []),
                   *([f"--account={profile.account}"] if profile.account else []),
                   *([f"--qos={profile.qos}"] if profile.qos else [])]
        connection = Connection.find(profile.env)
        job_id = self._submit(script, output.parent, options, connection)
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = self._ask(connection, [job_id]).get(job_id)
            if found is not None and found.finished:
                return _exit_status(found)
            time.sleep(2)
        connection.request("DELETE", negotiate(connection).ctld(f"job/{job_id}"))
        return 124
