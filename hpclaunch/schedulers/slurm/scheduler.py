"""Slurm: the #SBATCH options and the template parts in templates/schedulers/slurm/; sbatch --parsable to
submit; squeue, then sacct, then scontrol for status (so status works when accounting is disabled or
purged); scancel to cancel. All through the command-runner seam."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.memsize import format_size
from hpclaunch.config.walltime import format_time, parse_time
from hpclaunch.core.shell import ShellExpr, quote
from hpclaunch.errors import CommandError, ConfigError
from hpclaunch.launchers import containers
from hpclaunch.schedulers.base import Check, JobStatus, PartitionLoad, Scheduler, Topology
from hpclaunch.schedulers.slurm.options import (
    MEMORY,
    SIGNAL_HINT,
    dependency_option,
    join_nodes,
    mail_options,
    over,
    signal_lead,
    split_nodes,
)
from hpclaunch.state.runfiles import CHECKPOINT_PREFIX, ENV_RESTART, ENV_RUN_DIR, PROGRESS, RunFiles, stopped_name

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile

SSH_SESSION_VARS = ("SSH_CLIENT", "SSH_CONNECTION", "SSH2_CLIENT", "SSH_TTY", "SSH_AUTH_SOCK")
MIN_RUN_BEFORE_WARNING = 13 * 60  # a job warned sooner after its start would requeue itself forever
_SBATCH_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
# on a node: removes the job's snapshots in node memory, where hpclaunch/runtime/train/peerstore.py `job_folder`
# puts them (/dev/shm, else the node's temporary folder; tests/unit/test_peer.py checks that the two agree)
PEER_MEMORY = ('for f in "/dev/shm/hpclaunch-$(id -u)/peer-${HPCLAUNCH_JOB_ID}-"* '
               '"${TMPDIR:-/tmp}/hpclaunch-$(id -u)/peer-${HPCLAUNCH_JOB_ID}-"*; do [ -e "$f" ] && rm -rf -- "$f" && '
               'echo "hpclaunch: $(hostname -s): gave back the snapshots in node memory ($f)"; done; true')


@dataclass(frozen=True)
class Directives:
    """The #SBATCH options of a job and what the script's requeue logic must agree with."""

    options: dict[str, str | None]
    requeue: bool  # USR1 (and a node failure) requeues the job; else the job checkpoints and ends
    why_not: str  # why it does not requeue, in words ("" when it does)
    chain: bool = False  # not requeued, but resumable (checkpoint.requeue false): a follow-on job goes on


def directives(spec: JobSpec, run_dir: Path, array: str | None = None) -> Directives:
    """hpclaunch's options, the profile's sbatch_extra over them, submit --sbatch over both (an option replaces
    the one of its name and its alternatives, options.over). array: ``0-N%K`` for a sweep's array script
    (`run_dir` is then the sweep folder, where the array script writes its own output)."""
    extra = _sbatch_extra(spec)
    opts = over(over(_own_options(spec, run_dir, array), extra), spec.sbatch)  # --sbatch: checked by resolve
    given = {**extra, **spec.sbatch}

    def origin(name: str) -> str:
        return "--sbatch" if name in spec.sbatch else f"profile {spec.profile.name} sbatch_extra"

    _check_given(spec, opts, given, origin)
    requeue = "requeue" in opts
    chain = not requeue and spec.resumable and not spec.checkpoint.requeue
    why_not = ("" if requeue else f"{origin('no-requeue')} no-requeue" if "no-requeue" in given
               else "checkpoint.requeue is false: a follow-on job resumes from the checkpoint" if chain
               else "its script does not resume from a checkpoint: checkpoint.resumable is false")
    return Directives(opts, requeue, why_not, chain)


def _own_options(spec: JobSpec, run_dir: Path, array: str | None) -> dict[str, str | None]:
    """The options hpclaunch writes itself, from the job spec and the profile."""
    part, res = spec.partition_spec, spec.resources
    ours: dict[str, str | None] = {
        "job-name": spec.name,
        "partition": spec.partition,
        "nodes": str(spec.nodes + spec.spare_nodes),  # the launch runs on spec.nodes of them (step.sh.j2)
        "ntasks-per-node": "1",
        "cpus-per-task": str(res.cpus_per_task),
        "time": spec.time,
        "output": str(RunFiles(run_dir).job_output("%A_%a" if array else "%j")),
        "open-mode": "append",
        "requeue" if spec.resumable and spec.checkpoint.requeue else "no-requeue": None,
    }
    if array:
        ours["array"] = array
    if warned(spec):
        # USR1 checkpoint.lead_time before the time limit: checkpoint and requeue (signals.sh.j2); a job that
        # cannot resume runs to its limit
        ours["signal"] = f"B:USR1@{spec.checkpoint.lead_time}"
    if part.gres:
        ours["gres"] = f"{part.gres}:{spec.gpus_per_node}"
    if res.mem_mb is not None:
        ours["mem"] = format_size(res.mem_mb)
    if res.exclusive:
        ours["exclusive"] = None
    if spec.profile.account:
        ours["account"] = spec.profile.account
    if spec.profile.qos:
        ours["qos"] = spec.profile.qos
    if spec.placement is not None and spec.placement.switches is not None:  # the network (submission/placement.py)
        wait = spec.placement.max_wait
        ours["switches"] = f"{spec.placement.switches}" + (f"@{wait}" if wait else "")
    if spec.placement is not None and spec.placement.segment is not None:
        ours["segment"] = str(spec.placement.segment)
    return {**ours, **mail_options(spec.notify.mail)}  # notify.mail: where the site has mail


def warned(spec: JobSpec) -> bool:
    """Whether Slurm signals USR1 checkpoint.lead_time before the time limit: a job that resumes, and long enough
    to train between the start and the warning."""
    return spec.resumable and parse_time(spec.time) >= spec.checkpoint.lead_time + MIN_RUN_BEFORE_WARNING


def _sbatch_extra(spec: JobSpec) -> dict[str, str | None]:
    """The profile's sbatch_extra by option name (a leading -- dropped), each name checked."""
    extra = {}
    for key, value in spec.profile.sbatch_extra.items():
        name = key.removeprefix("--")
        if not _SBATCH_KEY.match(name):
            raise ConfigError(f"{key!r} is not an sbatch option name", key=f"sbatch_extra.{key}")
        extra[name] = value
    return extra


def _check_given(spec: JobSpec, opts: dict[str, str | None], given: dict[str, str | None],
                 origin: Callable[[str], str]) -> None:
    """What the final options cannot be: a value with a line break, a requeue of a script that does not
    resume, a signal the job cannot act on, two ways of asking the memory."""
    for name, value in opts.items():
        if value is not None and ("\n" in value or "\r" in value):
            raise ConfigError(f"the value of #SBATCH --{name} holds a line break, which an #SBATCH line "
                              f"cannot carry: {value!r}", hint="rename the path or value without line breaks")
    if "requeue" in opts and not spec.resumable:
        raise ConfigError(f"{origin('requeue')} requeue: the script of {spec.recipe.name} does not resume from a "
                          "checkpoint (checkpoint.resumable is false): requeued, it would start again from scratch",
                          hint="--set checkpoint.resumable=true if it saves on SIGUSR1 and resumes when started again "
                               "(docs/recipes.md#your-own-script)")
    if "signal" in given:
        _check_signal(spec, given["signal"], origin("signal"))
    if spec.recipe.resources.mem_per_device is not None and MEMORY & set(given):
        name = min(MEMORY & set(given))
        raise ConfigError(f"{origin(name)} {name} and resources.mem_per_device both ask the job's memory",
                          hint="keep one: --set resources.mem_per_device=SIZE asks it per device")


def _check_signal(spec: JobSpec, value: str | None, origin: str) -> None:
    try:
        lead = signal_lead(value)
    except ValueError as exc:
        raise ConfigError(f"{origin} signal={value}: {exc}", hint=SIGNAL_HINT) from None
    limit = parse_time(spec.time)
    if limit - lead < MIN_RUN_BEFORE_WARNING:
        raise ConfigError(f"{origin} signal={value}: the job would be warned {max(limit - lead, 0) // 60} min after "
                          f"it starts (time limit {spec.time}): too soon to train between two checkpoints and "
                          f"requeues (at least {MIN_RUN_BEFORE_WARNING // 60} min)",
                          hint=f"ask for --time {format_time(lead + MIN_RUN_BEFORE_WARNING)} or more, or a shorter "
                               "lead time")


def sbatch_options(spec: JobSpec, run_dir: Path, array: str | None = None) -> list[str]:
    """The job's #SBATCH options (`directives`), as written into its script."""
    return sbatch_lines(directives(spec, run_dir, array).options)


def sbatch_lines(options: dict[str, str | None]) -> list[str]:
    """The #SBATCH options, sorted, each value quoted for Slurm's own parser (sbatch's, not a shell: it takes
    quotes as a shell does, and a backslash as an escape of the next character, inside quotes too)."""
    # sbatch reads a backslash in an #SBATCH line as an escape, inside quotes too: doubled, it arrives whole
    return [f"--{k}" if v is None else f"--{k}={quote(v).replace(chr(92), chr(92) * 2)}"
            for k, v in sorted(options.items())]


def exclude_option(script: Path, also: Sequence[str] = (), read: Callable[[Path], str] | None = None,
                   scheduler: str = "slurm") -> list[str]:
    """``--exclude=`` for the nodes blamed for recent failures (hpclaunch/state/suspects.py) and `also` (`resume
    --exclude`), joined with the script's own ``#SBATCH --exclude`` (an sbatch option given on the command line
    replaces it)."""
    from hpclaunch.state import suspects

    nodes = sorted({*suspects.excluded(scheduler), *split_nodes(join_nodes(*also))})
    if not nodes:
        return []
    text = read(script) if read else script.read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("#SBATCH --exclude="):
            nodes = sorted({*nodes, *split_nodes(line.split("=", 1)[1])})
    return [f"--exclude={','.join(nodes)}"]


class SlurmScheduler(Scheduler):
    name = "slurm"
    restarts_default = 3

    def parse_options(self, options: Sequence[str]) -> dict[str, str | None]:
        from hpclaunch.schedulers.slurm.options import parse_sbatch

        return parse_sbatch(options)

    def merge_options(self, recorded: dict[str, str | None], given: dict[str, str | None]) -> dict[str, str | None]:
        merged = over(recorded, given)  # --no-requeue given replaces a recorded --requeue
        if recorded.get("exclude") and given.get("exclude"):  # --exclude adds to the nodes excluded before
            merged["exclude"] = join_nodes(recorded["exclude"], given["exclude"])
        return merged

    def write_profile(self, name: str, partitions: Sequence[str], out: Path | None, *, force: bool = False) -> Path:
        from hpclaunch.schedulers.slurm.discover import write_profile

        return write_profile(name, tuple(partitions), out, force=force)

    def check_available(self) -> None:
        self.host.require("sbatch")

    def check_profile(self, profile: Profile) -> list[Check]:
        from hpclaunch.schedulers.slurm.checks import profile_checks

        return profile_checks(profile)

    def run_probe(self, script: Path, output: Path, profile: Profile, *, timeout: float) -> int:
        from hpclaunch.schedulers.slurm.checks import probe

        return probe(script, output, profile, timeout=timeout)

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        part = spec.partition_spec
        told = directives(spec, run_dir)
        return {
            "options": sbatch_lines(told.options),
            "requeue": told.requeue,
            "why_not_requeued": told.why_not,
            "chain": told.chain,
            "lead_time": spec.checkpoint.lead_time if warned(spec) else None,
            # this restart's marker of ranks that stopped on their own before the time limit (the runtime writes it)
            "stopped_marker": ShellExpr(f"${{{ENV_RUN_DIR}}}/{PROGRESS}/" + stopped_name(f"${{{ENV_RESTART}}}")),
            "cpus_per_task": spec.resources.cpus_per_task,
            "gres": f"{part.gres}:{spec.gpus_per_node}" if part.gres else None,
            "container": containers.step_options(spec, run_dir),
            "state_dir": RunFiles(run_dir).scheduler_state(self.name),
            "checkpoint_glob": f"{CHECKPOINT_PREFIX}*",
            "max_requeues": spec.profile.max_requeues_without_progress,
            "suspect_hours": f"{spec.profile.suspect_node_hours:g}",
            # the job's folders of snapshots in node memory (hpclaunch/runtime/train/peerstore.py `job_folder`),
            # removed on each node after a launch that failed and was not relaunched
            "peer_memory": PEER_MEMORY if spec.restarts.max and spec.recipe.train.peer_snapshot_every else None,
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
        excluded = exclude_option(script, read=self.host.read_text)
        if excluded:
            self.check_room(self.host.read_text(script), split_nodes(excluded[0].split("=", 1)[1]))
        return self._sbatch(["sbatch", "--parsable", *dependency_option(after), *excluded, str(script)])

    def check_room(self, text: str, excluded: Sequence[str]) -> None:
        """A LimitError, before anything is queued, when the nodes left out (suspects, --exclude) leave the job's
        partition fewer nodes than it asks for: Slurm would only say "Requested node configuration is not
        available". Nothing when sinfo cannot tell."""
        asked = dict(line[len("#SBATCH --"):].split("=", 1) for line in text.splitlines()
                     if line.startswith("#SBATCH --") and "=" in line)
        count = re.match(r"\d+", asked.get("nodes", "1"))
        want = int(count.group()) if count else 1
        part = asked.get("partition", "").strip("'\"")
        proc = self.host.run(["sinfo", "-h", "-N", "-o", "%N", *(["-p", part] if part else [])], check=False)
        nodes = set(proc.stdout.split())
        out = sorted(nodes & set(excluded))
        if nodes and len(nodes) - len(out) < want:
            from hpclaunch.errors import LimitError

            raise LimitError(f"the job asks for {want} node(s) of partition {part or '(default)'}, which has "
                             f"{len(nodes)}; {len(out)} of them are left out ({', '.join(out)}: suspect nodes and "
                             f"--exclude), so {len(nodes) - len(out)} remain",
                             hint="`hpclaunch suspects` shows why each is a suspect and `hpclaunch suspects --clear "
                                  "NODE` forgets one that is healthy again; or ask for fewer nodes")

    def _sbatch(self, argv: list[str]) -> str:
        """Run sbatch --parsable; the job id it answered. Over SSH, without the session's SSH_* variables: sbatch
        passes its environment on to the job, where SSH_CLIENT makes every `bash -c` of a step read ~/.bashrc
        (which may put another python first) and would tell the job the laptop's address."""
        if self.host.remote:
            argv = ["env", *(f"-u{name}" for name in SSH_SESSION_VARS), *argv]
        proc = self.host.run(argv, timeout=120)
        job_id = proc.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise CommandError(f"sbatch answered {proc.stdout.strip()!r}, not a job id")
        return job_id

    def submit_array(self, script: Path, sweep_dir: Path, count: int, max_parallel: int | None,
                     after: Sequence[str] = ()) -> str:
        return self.submit(script, sweep_dir, after)  # --array is in the script

    def forget_requeues(self, run_dir: Path) -> None:
        """A fresh count of requeues without progress, for a job queued again: the one before it may have stopped
        on that count."""
        count = RunFiles(run_dir).scheduler_state(self.name) / "requeues-without-progress"
        if self.host.remote:  # the run directory is on the login node
            self.host.run(["rm", "-f", "--", str(count)])
        else:
            count.unlink(missing_ok=True)

    def resubmit(self, script: Path, run_dir: Path, *, restart: int, exclude: Sequence[str] = ()) -> str:
        self.forget_requeues(run_dir)
        env = f"--export=ALL,HPCLAUNCH_RESTART_BASE={restart},HPCLAUNCH_RETRY=0"
        return self._sbatch(["sbatch", "--parsable", env, *exclude_option(script, exclude, self.host.read_text),
                            str(script)])

    # Status asks for text, not --json: the same on Slurm 21.08 to 24.x, and squeue --json before 23.02
    # ignores --jobs (it dumps every job of the cluster); see hpclaunch/schedulers/slurm/output.py.
    def _squeue(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        from hpclaunch.schedulers.slurm import (
            output as slurm_output,  # only for status: keeps the dry-run imports small
        )

        proc = self.host.run(["squeue", "--noheader", "--array", f"--format={slurm_output.SQUEUE_FORMAT}",
                        f"--jobs={','.join(ids)}"], check=False)
        return slurm_output.select(slurm_output.parse_squeue_text(proc.stdout), ids, "squeue")

    def _sacct(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        from hpclaunch.schedulers.slurm import output as slurm_output

        proc = self.host.run(["sacct", "--parsable2", "--allocations", f"--format={slurm_output.SACCT_FIELDS}",
                        f"--jobs={','.join(ids)}"], check=False)
        if proc.returncode != 0:
            return {}  # accounting disabled: fall back to scontrol
        return slurm_output.select(slurm_output.parse_sacct_text(proc.stdout), ids, "sacct")

    def usage(self, job_id: str) -> dict[str, Any] | None:
        """From sacct (the allocation and its steps); None with accounting disabled."""
        from hpclaunch.schedulers.slurm import accounting

        proc = self.host.run(["sacct", "--parsable2", f"--format={accounting.SACCT_FIELDS}", f"--jobs={job_id}"],
                       check=False)
        return accounting.from_sacct(proc.stdout, job_id) if proc.returncode == 0 else None

    def _scontrol(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        """One `scontrol show job` call: for one id that job, for several every job slurmctld still knows
        (so many finished jobs cost one call, with accounting disabled too)."""
        from hpclaunch.schedulers.slurm import output as slurm_output

        argv = ["scontrol", "show", "job", "--oneliner"] + ([ids[0]] if len(ids) == 1 else [])
        proc = self.host.run(argv, check=False)
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
        self.host.run(["scancel", "--full", str(job_id)])

    def load(self, partitions: Sequence[str], gres: str | None) -> list[PartitionLoad] | None:
        from hpclaunch.schedulers.slurm import avail

        return avail.load(self.host, partitions, gres)

    def estimated_start(self, partition: str, nodes: int, gres: str | None, per_node: int,
                        time_limit: str | None) -> str | None:
        from hpclaunch.schedulers.slurm import avail

        return avail.start_estimate(self.host, partition, nodes, gres, per_node, time_limit)

    def topology(self, partition: str) -> Topology | None:
        """The leaf switches or blocks that hold the partition's nodes (schedulers/slurm/topology.py)."""
        from hpclaunch.schedulers.slurm.topology import read_topology

        return read_topology(self.host.run, partition)

    def find_job(self, run_dir: Path) -> str | None:
        """From the job's output file (it started), else from squeue: the job whose batch script is this
        run directory's (still queued). Raises CommandError when squeue cannot be asked."""
        from hpclaunch.state.runfiles import job_output_id

        files = RunFiles(run_dir)
        for out in reversed(files.job_outputs() if not self.host.remote else []):  # over SSH: squeue only
            job_id = job_output_id(out.name)
            if job_id and job_id.isdigit():
                return job_id
        proc = self.host.run(["squeue", "--noheader", "--me", "--format=%i|%o"])
        for line in proc.stdout.splitlines():
            job_id, _, command = line.partition("|")
            if command.strip() == str(files.script):
                return job_id.strip()
        return None
