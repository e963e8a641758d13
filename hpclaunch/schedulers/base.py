"""The scheduler interface and the job states every backend maps onto.

A scheduler owns its part of the job script: the template folder ``templates/schedulers/<name>/``
(header, job variables, the step that starts one task per node, the reaction to signals; see its
README.md) and the values those parts need (`script_context`). Everything else in the script and
every launcher sees only the neutral variables the scheduler's ``job.sh.j2`` exports.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.core.backends import SCHEDULERS
from hpclaunch.core.remote import LOCAL, Host

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile

# States a job ends in; anything else may still change.
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
                      "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"})


def clock(seconds: int | float | None) -> str | None:
    """Seconds as squeue prints a duration: 7 -> "0:07", 3723 -> "1:02:03", 90000 -> "1-01:00:00"."""
    if seconds is None or seconds < 0:
        return None
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{s:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{s:02d}"
    return f"{minutes}:{s:02d}"


_CLOCK = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")


def clock_seconds(text: str | None) -> float | None:
    """Slurm's durations ("1-02:03:04", "1:02:03", "03:04.567", "0:07") in seconds; None for anything else
    (UNLIMITED, empty)."""
    m = _CLOCK.match((text or "").strip())
    if not m:
        return None
    days, hours, minutes = (int(g) if g else 0 for g in m.group(1, 2, 3))
    return days * 86400 + hours * 3600 + minutes * 60 + float(m.group(4))


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ..., UNKNOWN
    reason: str | None = None  # Slurm's pending/failure reason code, e.g. Resources
    exit_code: str | None = None  # "0:0" style (code:signal)
    nodes: str | None = None
    elapsed: str | None = None  # as squeue prints it (`clock`): 0:07, 1:02:03, 2-00:00:00
    time_limit: str | None = None
    source: str = ""  # which command answered: squeue, scontrol, sacct; a backend that answers itself: its name (local)
    ended: str | None = None  # when it ended (local time, 2026-11-23T06:44:07), where the scheduler says
    reason_text: str | None = None  # the reason in words, with what to do (the scheduler's own knowledge)
    expected_start: str | None = None  # a pending job's start as the scheduler estimates it (2026-11-29T03:10:00)

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def pending_text(self, today: str | None = None) -> str:
        """How a table shows a pending job: its reason and, when the scheduler estimates one, its start
        ("Resources, ~03:10"; "~11-30 03:10" another day); "" for a job that is not pending. `today`: the date
        (2026-11-29) the times are relative to; default today here."""
        if self.state != "PENDING":
            return ""
        start = self.expected_start or ""
        if start:
            import time

            day, _, hour = start.partition("T")
            start = "~" + (hour[:5] if day == (today or time.strftime("%Y-%m-%d")) else f"{day[5:]} {hour[:5]}")
        return ", ".join(p for p in (self.reason, start) if p)


@dataclass(frozen=True)
class PartitionLoad:
    """How busy a partition is now: its nodes (`nodes_idle`: no job on them; `down`: down, drained or reserved)
    and its devices (`devices_free`: not in use on a node that takes jobs)."""

    name: str
    nodes: int
    nodes_idle: int
    devices: int
    devices_free: int
    down: int = 0


@dataclass(frozen=True)
class Topology:
    """The cluster's network as its scheduler reports it: leaf switches (`kind` tree) or blocks (block), each as
    the number of nodes it holds; `source`: the command that said so."""

    kind: str  # "tree" or "block"
    sizes: tuple[int, ...]  # nodes under each leaf switch / in each block
    source: str


@dataclass(frozen=True)
class Check:
    """One row of `hpclaunch profiles check`: what was checked, what was found, and how to fix it."""

    name: str
    ok: bool
    result: str
    fix: str = ""


class Scheduler(ABC):
    name: str
    restarts_default = 0  # restarts.max when neither profile nor recipe sets it (relaunches inside the allocation)
    host: Host = LOCAL  # where its commands run: this machine, or a login node (core/remote.py; capability "ssh")

    @property
    def capabilities(self) -> frozenset[str]:
        """What this scheduler can do, as its entry in hpclaunch/core/backends.py declares (CAPABILITIES there)."""
        return SCHEDULERS[self.name].capabilities

    @property
    def template_dir(self) -> str:
        """This scheduler's folder of template parts, relative to a templates folder."""
        return f"schedulers/{self.name}"

    def parse_options(self, options: Sequence[str]) -> dict[str, str | None] | None:
        """`submit --sbatch KEY[=VALUE]...`: the scheduler's own directives, checked (ConfigError for a bad one);
        None from a scheduler that has none."""
        return None

    def merge_options(self, recorded: dict[str, str | None], given: dict[str, str | None]) -> dict[str, str | None]:
        """A resubmission's `submit --sbatch` options (`given`) over those its resolved.yaml recorded."""
        return {**recorded, **given}

    def write_profile(self, name: str, partitions: Sequence[str], out: Path | None, *, force: bool = False) -> Path:
        """`hpclaunch profiles init`: a profile written from what this scheduler's cluster says about itself."""
        from hpclaunch.errors import ConfigError

        raise ConfigError(f"the {self.name} scheduler cannot describe its cluster",
                          hint="copy a bundled profile and edit it (docs/profiles.md)")

    def check_profile(self, profile: Profile) -> list[Check]:
        """What the cluster says about the profile, asked from here: commands, partitions, resources."""
        return []

    def run_probe(self, script: Path, output: Path, profile: Profile, *, timeout: float) -> int:
        """Run `script` as one task on one node of the profile's default partition (one device where it has
        devices), its output into `output`; wait for it and return its exit code."""
        raise NotImplementedError

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        """Values this scheduler's template parts use (as ``sched``); raise ConfigError for a bad one."""
        return {}

    def array_context(self, specs: Sequence[JobSpec], sweep_dir: Path, max_parallel: int | None) -> dict[str, Any]:
        """Values the scheduler's ``array.sh.j2`` uses (as ``sched``) in a sweep's array script: element i
        of the array runs ``specs[i]``, at most `max_parallel` at a time (None: no limit)."""
        return {"max_parallel": max_parallel}

    def dependency_options(self, after: Sequence[str]) -> list[str]:
        """How this scheduler is told to start the job only after others (``submit --after JOB[:ok|any|notok]``);
        raise ConfigError for a value it cannot take. The default: it cannot wait for other jobs."""
        from hpclaunch.errors import ConfigError

        if not after:
            return []
        raise ConfigError(f"the {self.name} scheduler starts a job at once and cannot wait for another",
                          key="--after", hint="submit when that job has ended, or use a profile whose scheduler "
                                              "is slurm")

    def submit_array(self, script: Path, sweep_dir: Path, count: int, max_parallel: int | None,
                     after: Sequence[str] = ()) -> str:
        """Queue a sweep's array script as one job array of `count` elements, once the jobs of `after` allow
        (``dependency_options``); return the array's id. Element i's job id is ``<id>_<i>``."""
        from hpclaunch.errors import ConfigError

        raise ConfigError(f"the {self.name} scheduler cannot run a sweep (submit --sweep)",
                          hint="submit each value with --set, or use a profile whose scheduler is slurm or local")

    def check_available(self) -> None:
        """Raise CommandError when this scheduler cannot be used from here (before anything is written).
        The default: always usable."""
        return None

    @abstractmethod
    def submit(self, script: Path, run_dir: Path, after: Sequence[str] = ()) -> str:
        """Queue the job script, to start once the jobs of `after` allow (``dependency_options``); return
        the job id."""

    def resubmit(self, script: Path, run_dir: Path, *, restart: int, exclude: Sequence[str] = ()) -> str:
        """Queue the job script of `run_dir` again as a new job (`hpclaunch resume`): its restarts numbered from
        `restart` on (HPCLAUNCH_RESTART), so its logs stay apart from those of the jobs before it, a fresh count
        of retries, and without the nodes `exclude` (only a scheduler that can "exclude_nodes"). The job
        resumes from the run directory's newest checkpoint by itself. Return the new job's id."""
        from hpclaunch.errors import ConfigError

        raise ConfigError(f"the {self.name} scheduler cannot queue a job again", hint="submit its resolved.yaml")

    @abstractmethod
    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """The status of each job, asking the scheduler once for all of them."""

    @abstractmethod
    def cancel(self, job_id: str) -> None:
        """Stop the job."""

    def usage(self, job_id: str) -> dict[str, Any] | None:
        """What the job used, from the scheduler's accounting, as the keyword arguments of
        hpclaunch.report.usage.summarize (state, source, elapsed_s, limit_s, cpu_s, cpus, nodes, max_rss_bytes,
        req_mem_per_node_bytes); None when this scheduler keeps none."""
        return None

    def load(self, partitions: Sequence[str], gres: str | None) -> list[PartitionLoad] | None:
        """How busy each partition is now (`hpclaunch avail`); None where this backend cannot tell."""
        return None

    def estimated_start(self, partition: str, nodes: int, gres: str | None, per_node: int,
                        time_limit: str | None) -> str | None:
        """When a job of this shape would start if submitted now (queuing nothing); None where it cannot tell."""
        return None

    def topology(self, partition: str) -> Topology | None:
        """The network's leaf switches or blocks under `partition`'s nodes, as the scheduler reports them
        (submission/placement.py); None where it reports none or cannot be asked."""
        return None

    def find_job(self, run_dir: Path) -> str | None:
        """The id of the job queued from `run_dir` (for a submit killed before it recorded the id), None
        when none was; raise HpclaunchError when this scheduler cannot tell."""
        from hpclaunch.errors import HpclaunchError

        raise HpclaunchError(f"the {self.name} scheduler cannot tell which job runs from {run_dir}")
