"""A job script's ``#SBATCH`` options as slurmrestd's job description: OpenAPI v0.0.38 (Slurm 22.05-23.11) here,
v0.0.40 to v0.0.45 (Slurm 23.11-26.05) through typed.py, as versions.py chose for the slurmrestd asked.

slurmrestd does not read the ``#SBATCH`` lines of the script it is given (checked on the dev cluster: a job
submitted with ``#SBATCH --partition=long --nodes=2`` and no fields ran on one node of the default partition).
So the lines the Slurm scheduler writes (hpclaunch/schedulers/slurm/scheduler.py `sbatch_options`, the
profile's ``sbatch_extra``, ``submit --sbatch``) are read back here, as sbatch reads them, and each option
becomes the field of the same meaning; command-line options (``--dependency``, ``--exclude``) override them as
they override sbatch's. An option that no version hpclaunch speaks has a field for is refused by name when the job
script is written; one that the version spoken has none for, when it is submitted (nothing is queued).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hpclaunch.errors import ConfigError
from hpclaunch.schedulers.slurm_rest import typed
from hpclaunch.schedulers.slurm_rest.connection import TOKEN_VAR
from hpclaunch.schedulers.slurm_rest.versions import LEGACY, OURS, span

# --export has no field (slurmrestd refuses it): the variables it names are put into the job's environment
EXPORT = "export"

# sbatch's long option -> the v0.0.38 job field (src/plugins/openapi/v0.0.38/jobs.c `job_params`, 22.05)
FIELDS: dict[str, str] = {
    "account": "account", "acctg-freq": "account_gather_frequency", "array": "array",
    "batch": "batch_features", "begin": "begin_time", "bb": "burst_buffer",
    "cluster-constraint": "cluster_constraint", "comment": "comment", "constraint": "constraints",
    "container": "container", "core-spec": "core_specification", "cores-per-socket": "cores_per_socket",
    "cpu-freq": "cpu_frequency", "cpus-per-gpu": "cpus_per_gpu", "cpus-per-task": "cpus_per_task",
    "chdir": "current_working_directory", "deadline": "deadline", "delay-boot": "delay_boot",
    "dependency": "dependency", "distribution": "distribution", "error": "standard_error",
    "exclude": "exclude_nodes", "exclusive": "exclusive", "get-user-env": "get_user_environment",
    "gpu-bind": "gpu_binding", "gpu-freq": "gpu_frequency", "gpus": "gpus", "gpus-per-node": "gpus_per_node",
    "gpus-per-socket": "gpus_per_socket", "gpus-per-task": "gpus_per_task", "gres": "gres",
    "gres-flags": "gres_flags", "hint": "cpu_binding_hint", "hold": "hold", "input": "standard_input",
    "job-name": "name", "kill-on-invalid-dep": "kill_on_invalid_dependency", "licenses": "licenses",
    "mail-type": "mail_type", "mail-user": "mail_user", "mcs-label": "mcs_label", "mem": "memory_per_node",
    "mem-bind": "memory_binding", "mem-per-cpu": "memory_per_cpu", "mem-per-gpu": "memory_per_gpu",
    "mincpus": "minimum_cpus_per_node", "nice": "nice", "no-kill": "no_kill", "no-requeue": "no_requeue",
    "nodelist": "nodelist", "nodes": "nodes", "ntasks": "tasks", "ntasks-per-core": "tasks_per_core",
    "ntasks-per-gpu": "ntasks_per_gpu", "ntasks-per-node": "tasks_per_node",
    "ntasks-per-socket": "tasks_per_socket", "open-mode": "open_mode", "output": "standard_output",
    "partition": "partition", "prefer": "prefer", "priority": "priority", "profile": "profile", "qos": "qos",
    "requeue": "requeue", "reservation": "reservation", "signal": "signal",
    "sockets-per-node": "sockets_per_node", "spread-job": "spread_job", "thread-spec": "thread_specification",
    "threads-per-core": "threads_per_core", "time": "time_limit", "time-min": "time_minimum",
    "tmp": "temporary_disk_per_node", "use-min-nodes": "minimum_nodes", "wait-all-nodes": "wait_all_nodes",
    "wckey": "wckey",
}


def sbatch_words(line: str) -> list[str]:
    """The arguments of one ``#SBATCH`` line as sbatch splits them (src/sbatch/opt.c `_get_argument`): a
    backslash takes the next character as it is, inside quotes too; quotes are removed; a space or a ``#``
    outside quotes ends an argument / the line."""
    words: list[str] = []
    word: list[str] = []
    started = escaped = False
    quote = ""
    for ch in line:
        if escaped:
            word.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = started = True
        elif quote:
            if ch == quote:
                quote = ""
            else:
                word.append(ch)
        elif ch in "\"'":
            quote, started = ch, True
        elif ch.isspace() or ch == "#":
            if started:
                words.append("".join(word))
                word, started = [], False
            if ch == "#":
                break
        else:
            word.append(ch)
            started = True
    if started:
        words.append("".join(word))
    return words


def script_options(script: str) -> list[str]:
    """The ``--key[=value]`` arguments of the script's ``#SBATCH`` lines, in order; like sbatch, only those
    before the first command (a line that is neither blank nor a comment)."""
    out: list[str] = []
    for line in script.splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            break
        if text.startswith("#SBATCH"):
            out += sbatch_words(text[len("#SBATCH"):])
    return out


def split(option: str) -> tuple[str, str | None]:
    """``--time=00:20:00`` -> ("time", "00:20:00"); ``--requeue`` -> ("requeue", None)."""
    name, eq, value = option.partition("=")
    return name.strip().removeprefix("--"), value if eq else None


def takes(name: str, version: str) -> bool:
    """Whether `version`'s job description has a field for sbatch's --`name` (--export always: the environment)."""
    return name == EXPORT or (name in FIELDS if version == LEGACY else typed.takes(name, version))


def _refuse(name: str, versions: str) -> ConfigError:
    placed = name in ("switches", "segment")  # asked for the network topology (submission/placement.py)
    return ConfigError(f"--{name} has no field in slurmrestd's job description (OpenAPI {versions})",
                       key=f"#SBATCH --{name}",
                       hint=("hpclaunch asks it to place the job by the network topology: --set topology.placement="
                             "none, or topology.kind: none in the profile" if placed else "drop it from the profile's "
                             "sbatch_extra or --sbatch") + ", or use the slurm scheduler (sbatch) for this job")


def field(name: str) -> str:
    """The v0.0.38 job field of sbatch's --`name`; ConfigError for an option it cannot take."""
    if name not in FIELDS:
        raise _refuse(name, LEGACY)
    return FIELDS[name]


# flags whose field takes a string (an empty one for sbatch's bare flag), not true
_VALUE_FLAGS = frozenset({"get-user-env"})


def check_options(names: Iterable[str], version: str | None = None) -> None:
    """Refuse an option that `version` (None: every version hpclaunch speaks) has no field for."""
    for name in names:
        if not any(takes(name, v) for v in ([version] if version else OURS)):
            raise _refuse(name, version or span(OURS))


def exported(value: str, here: Mapping[str, str]) -> dict[str, str]:
    """sbatch's ``--export=`` list as the variables to send: ``ALL`` (everything of `here`), ``NONE``, ``NAME``
    (its value here, when set), ``NAME=value``; never the token (SLURM_JWT)."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in value.split(",")):
        name, eq, given = item.partition("=")
        if item.upper() == "ALL":
            out.update(here)
        elif eq:
            out[name] = given
        elif item and item.upper() != "NONE" and item in here:
            out[item] = here[item]
    out.pop(TOKEN_VAR, None)
    return out


def describe(options: Sequence[str], environment: Mapping[str, str], cwd: str,
             here: Mapping[str, str] | None = None, version: str = LEGACY) -> dict[str, Any]:
    """The job description in `version`: every option (later ones win, as on sbatch's command line after the
    script's lines), the job's environment (with what ``--export`` names from `here`, the submitting environment)
    and its working directory. In v0.0.38 a flag (no value) is ``true`` and a value is passed as the string sbatch
    would get (slurmrestd parses it with sbatch's own option code); from v0.0.40 on typed.py writes each field."""
    job: dict[str, Any] = {}
    env = dict(environment)
    pairs = [split(option) for option in options]
    check_options((name for name, _ in pairs), version)
    for name, value in pairs:
        if name == EXPORT:
            env.update(exported(value or "", here or {}))
    if version != LEGACY:
        job = typed.describe([(n, v) for n, v in pairs if n != EXPORT], env, version)
        job["environment"] = typed.environment(env)
        job.setdefault("current_working_directory", cwd)
        return job
    for name, value in pairs:
        if name != EXPORT:
            job[field(name)] = value if value is not None else "" if name in _VALUE_FLAGS else True
    if str(job.get("signal", "")).upper().startswith(("B:", "RB:", "BR:")):
        # sbatch alone takes B: (Slurm 22.05 proc_args.c get_signal_opts); the job script arms its own instead
        raise ConfigError("slurmrestd 22.05 cannot send the warning signal to the batch shell alone "
                          f"(--signal={job['signal']})", key="#SBATCH --signal",
                          hint="the slurm-rest job script arms its own USR1 before the time limit; drop --signal")
    job["environment"] = env
    job.setdefault("current_working_directory", cwd)
    return job
