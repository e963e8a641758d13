"""Slurm: the #SBATCH options and the template parts in templates/schedulers/slurm/; sbatch --parsable to
submit; squeue, then sacct, then scontrol for status (so status works when accounting is disabled or
purged); scancel to cancel. All through the command-runner seam."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.walltime import parse_time
from hpclaunch.core import cmd
from hpclaunch.core.shell import quote
from hpclaunch.errors import CommandError, ConfigError
from hpclaunch.launchers import containers
from hpclaunch.schedulers.base import Check, JobStatus, Scheduler
from hpclaunch.schedulers.slurm.options import dependency_option
from hpclaunch.state.runfiles import CHECKPOINT_PREFIX, RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile

REQUEUE_WARNING = 120  # seconds before the time limit that Slurm signals USR1
REQUEUE_MIN_TIME = 15 * 60  # jobs shorter than this get no USR1 warning
_SBATCH_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def sbatch_options(spec: JobSpec, run_dir: Path, array: str | None = None) -> list[str]:
    """The #SBATCH options, sorted, each value quoted for Slurm's own parser (sbatch's, not a shell: it takes
    quotes as a shell does, and a backslash as an escape of the next character, inside quotes too). array:
    ``0-N%K`` for a sweep's array script (`run_dir` is then the sweep folder, where the array script writes
    its own output)."""
    part = spec.partition_spec
    opts: dict[str, str | None] = {
        "job-name": spec.name,
        "partition": spec.partition,
        "nodes": str(spec.nodes),
        "ntasks-per-node": "1",
        "cpus-per-task": str(part.cpus_per_node),
        "time": spec.time,
        "output": str(RunFiles(run_dir).job_output("%A_%a" if array else "%j")),
        "open-mode": "append",
        "requeue": None,
    }
    if array:
        opts["array"] = array
    if parse_time(spec.time) >= REQUEUE_MIN_TIME:
        # USR1 two minutes before the time limit: checkpoint and requeue (see blocks/wait.sh.j2).
        # A shorter job would be warned as it starts and requeue itself forever.
        opts["signal"] = f"B:USR1@{REQUEUE_WARNING}"
    if part.gres:
        opts["gres"] = f"{part.gres}:{spec.gpus_per_node}"
    if spec.profile.account:
        opts["account"] = spec.profile.account
    if spec.profile.qos:
        opts["qos"] = spec.profile.qos
    for key, value in spec.profile.sbatch_extra.items():
        name = key.removeprefix("--")
        if not _SBATCH_KEY.match(name):
            raise ConfigError(f"{key!r} is not an sbatch option name", key=f"sbatch_extra.{key}")
        opts[name] = value
    opts.update(spec.sbatch)  # submit --sbatch, checked by resolve (slurm_options.parse_sbatch)
    for name, value in opts.items():
        if value is not None and ("\n" in value or "\r" in value):
            raise ConfigError(f"the value of #SBATCH --{name} holds a line break, which an #SBATCH line "
                              f"cannot carry: {value!r}", hint="rename the path or value without line breaks")
    # sbatch reads a backslash in an #SBATCH line as an escape, inside quotes too: doubled, it arrives whole
    return [f"--{k}" if v is None else f"--{k}={quote(v).replace(chr(92), chr(92) * 2)}"
            for k, v in sorted(opts.items())]



def exclude_option(script: Path) -> list[str]:
    """``--exclude=`` for the nodes blamed for recent failures (hpclaunch/state/suspects.py), joined with the
    script's own ``#SBATCH --exclude`` (an sbatch option given on the command line replaces it)."""
    from hpclaunch.state import suspects

    nodes = suspects.excluded()
    if not nodes:
        return []
    for line in script.read_text(encoding="utf-8").splitlines():
        if line.startswith("#SBATCH --exclude="):
            own = line.split("=", 1)[1].strip().strip("'")
            nodes = sorted({*nodes, *(n for n in own.split(",") if n)})
    return [f"--exclude={','.join(nodes)}"]


class SlurmScheduler(Scheduler):
    name = "slurm"
    excludes_suspects = True

    def parse_options(self, options: Sequence[str]) -> dict[str, str | None]:
        from hpclaunch.schedulers.slurm.options import parse_sbatch

        return parse_sbatch(options)

    def write_profile(self, name: str, partitions: Sequence[str], out: Path | None, *, force: bool = False) -> Path:
        from hpclaunch.schedulers.slurm.discover import write_profile

        return write_profile(name, tuple(partitions), out, force=force)

    def check_available(self) -> None:
        cmd.require("sbatch")

    def check_profile(self, profile: Profile) -> list[Check]:
        from hpclaunch.schedulers.slurm.checks import profile_checks

        return profile_checks(profile)

    def run_probe(self, script: Path, output: Path, profile: Profile, *, timeout: float) -> int:
        from hpclaunch.schedulers.slurm.checks import probe

        return probe(script, output, profile, timeout=timeout)

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        part = spec.partition_spec
        return {
            "options": sbatch_options(spec, run_dir),
            "cpus_per_task": part.cpus_per_node,
            "gres": f"{part.gres}:{spec.gpus_per_node}" if part.gres else None,
            "container": containers.step_options(spec, run_dir),
            "state_dir": RunFiles(run_dir).scheduler_state(self.name),
            "checkpoint_glob": f"{CHECKPOINT_PREFIX}*",
            "max_requeues": spec.profile.max_requeues_without_progress,
            "suspect_hours": f"{spec.profile.suspect_node_hours:g}",
        }

    def array_context(self, specs: Sequence[JobSpec], sweep_dir: Path, max_parallel: int | None) -> dict[str, Any]:
        """The array's #SBATCH options: those of every element (which must agree) with ``--array=0-N%K``."""
        array = f"0-{len(specs) - 1}" + (f"%{max_parallel}" if max_parallel else "")
        first = sbatch_options(specs[0], sweep_dir, array)
        for index, spec in enumerate(specs[1:], 1):
            other = sbatch_options(spec, sweep_dir, array)
            if other != first:
                mine = ", ".join(o for o in other if o not in first)
                theirs = ", ".join(o for o in first if o not in other)
                raise ConfigError(
                    f"sweep element {index} needs #SBATCH {mine} where element 0 has {theirs}: the elements of a "
                    "sweep run as one job array and share its #SBATCH options",
                    hint="sweep only keys that keep the resources; submit other layouts, times or partitions "
                         "as separate sweeps")
        return {"options": first}

    def dependency_options(self, after: Sequence[str]) -> list[str]:
        return dependency_option(after)

    def submit(self, script: Path, run_dir: Path, after: Sequence[str] = ()) -> str:
        argv = ["sbatch", "--parsable", *dependency_option(after), *exclude_option(script), str(script)]
        proc = cmd.run(argv, timeout=120)
        job_id = proc.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise CommandError(f"sbatch answered {proc.stdout.strip()!r}, not a job id")
        return job_id

    def submit_array(self, script: Path, sweep_dir: Path, count: int, max_parallel: int | None,
                     after: Sequence[str] = ()) -> str:
        return self.submit(script, sweep_dir, after)  # --array is in the script

    # Status asks for text, not --json: the same on Slurm 21.08 to 24.x, and squeue --json before 23.02
    # ignores --jobs (it dumps every job of the cluster); see hpclaunch/schedulers/slurm/output.py.
    def _squeue(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        from hpclaunch.schedulers.slurm import (
            output as slurm_output,  # only for status: keeps the dry-run imports small
        )

        proc = cmd.run(["squeue", "--noheader", "--array", f"--format={slurm_output.SQUEUE_FORMAT}",
                        f"--jobs={','.join(ids)}"], check=False)
        return slurm_output.select(slurm_output.parse_squeue_text(proc.stdout), ids, "squeue")

    def _sacct(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        from hpclaunch.schedulers.slurm import output as slurm_output

        proc = cmd.run(["sacct", "--parsable2", "--allocations", f"--format={slurm_output.SACCT_FIELDS}",
                        f"--jobs={','.join(ids)}"], check=False)
        if proc.returncode != 0:
            return {}  # accounting disabled: fall back to scontrol
        return slurm_output.select(slurm_output.parse_sacct_text(proc.stdout), ids, "sacct")

    def usage(self, job_id: str) -> dict[str, Any] | None:
        """From sacct (the allocation and its steps); None with accounting disabled."""
        from hpclaunch.schedulers.slurm import accounting

        proc = cmd.run(["sacct", "--parsable2", f"--format={accounting.SACCT_FIELDS}", f"--jobs={job_id}"],
                       check=False)
        return accounting.from_sacct(proc.stdout, job_id) if proc.returncode == 0 else None

    def _scontrol(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        """One `scontrol show job` call: for one id that job, for several every job slurmctld still knows
        (so many finished jobs cost one call, with accounting disabled too)."""
        from hpclaunch.schedulers.slurm import output as slurm_output

        argv = ["scontrol", "show", "job", "--oneliner"] + ([ids[0]] if len(ids) == 1 else [])
        proc = cmd.run(argv, check=False)
        if proc.returncode != 0:
            return {}
        return slurm_output.select(slurm_output.parse_scontrol(proc.stdout), ids, "scontrol")

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        ids = [str(j) for j in job_ids]
        if not ids:
            return {}
        found = self._squeue(ids)
        missing = [j for j in ids if j not in found or found[j].state == "COMPLETING"]
        if missing:
            found.update(self._sacct(missing))
        missing = [j for j in ids if j not in found or found[j].state == "COMPLETING"]
        if missing:
            found.update(self._scontrol(missing))
        for jid in ids:
            found.setdefault(jid, JobStatus(jid, "UNKNOWN", source="none"))
        return found

    def cancel(self, job_id: str) -> None:
        cmd.run(["scancel", "--full", str(job_id)])

    def find_job(self, run_dir: Path) -> str | None:
        """From the job's output file (it started), else from squeue: the job whose batch script is this
        run directory's (still queued). Raises CommandError when squeue cannot be asked."""
        from hpclaunch.state.runfiles import job_output_id

        files = RunFiles(run_dir)
        for out in reversed(files.job_outputs()):
            job_id = job_output_id(out.name)
            if job_id and job_id.isdigit():
                return job_id
        proc = cmd.run(["squeue", "--noheader", "--me", "--format=%i|%o"])
        for line in proc.stdout.splitlines():
            job_id, _, command = line.partition("|")
            if command.strip() == str(files.script):
                return job_id.strip()
        return None
