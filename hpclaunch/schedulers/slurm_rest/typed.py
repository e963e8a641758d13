"""sbatch's options as the data_parser's job description: OpenAPI v0.0.40 to v0.0.45 (Slurm 23.11 to 26.05).

v0.0.38 took sbatch's own strings and parsed them with sbatch's option code (jobdesc.py). From v0.0.40 on each field has
a type of its own, and the fields are those of Slurm's job_desc_msg_t, filled as sbatch fills them
(src/common/slurm_opt.c `slurm_opt_create_job_desc`): a time limit in minutes and memory in MiB as
``{"set", "infinite", "number"}``, node lists and flags as lists, GPUs as TRES strings (``--gres=gpu:1`` is
``tres_per_node: "gres/gpu:1"``), ``--get-user-env`` as ``SLURM_GET_USER_ENV=1`` in the environment (sbatch.c; slurmd
loads the user's login environment when it sees it). The fields and their JSON types are those of the job_desc_msg
schema that slurmrestd 24.11 (v0.0.40, v0.0.41) and 26.05 (v0.0.42-v0.0.45) publish (recorded in
tests/fixtures/slurmrestd/openapi/jobdesc-fields.json; the parsers in src/plugins/data_parser/v0.0.4x/parsers.c).
An option without a field in the version spoken is refused by name."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from hpclaunch.config.walltime import parse_time
from hpclaunch.errors import ConfigError

Convert = Callable[[str | None, str], Any]  # (value, option name) -> the field's JSON value


def _bad(name: str, value: str | None, want: str) -> ConfigError:
    return ConfigError(f"--{name}={value} is not {want}", key=f"#SBATCH --{name}")


def number_struct(n: int | None, infinite: bool = False) -> dict[str, Any]:
    """The data_parser's {set, infinite, number} (UINT32/UINT64_NO_VAL_STRUCT)."""
    return {"set": n is not None and not infinite, "infinite": infinite, "number": n or 0}


def text(value: str | None, name: str) -> str:
    return value or ""


def integer(value: str | None, name: str) -> int:
    if value is None or not re.fullmatch(r"-?\d+", value.strip()):
        raise _bad(name, value, "a whole number")
    return int(value)


def counted(value: str | None, name: str) -> dict[str, Any]:
    return number_struct(integer(value, name))


def yes(value: str | None, name: str) -> bool:
    return True


def no(value: str | None, name: str) -> bool:
    return False


def minutes(value: str | None, name: str) -> dict[str, Any]:
    """A Slurm time (``20``, ``00:20:00``, ``1-00:00:00``, ``UNLIMITED``) in whole minutes, rounded up as sbatch
    does (time_str2mins)."""
    if (value or "").strip().upper() in ("UNLIMITED", "INFINITE", "-1"):
        return number_struct(None, infinite=True)
    try:
        return number_struct(math.ceil(parse_time(value or "") / 60))
    except ValueError:
        raise _bad(name, value, "a Slurm time (MM, HH:MM:SS, D-HH:MM:SS)") from None


_MEM = re.compile(r"^(\d+)([KMGT])?B?$", re.IGNORECASE)


def mebibytes(value: str | None, name: str) -> int:
    """sbatch's memory sizes in MiB (proc_args.c str_to_mbytes): MiB by default, K rounded up, G, T."""
    m = _MEM.match((value or "").strip())
    if not m:
        raise _bad(name, value, "a memory size (e.g. 4096, 4G)")
    n, unit = int(m.group(1)), (m.group(2) or "M").upper()
    return {"K": -(-n // 1024), "M": n, "G": n * 1024, "T": n * 1024 * 1024}[unit]


def memory(value: str | None, name: str) -> dict[str, Any]:
    return number_struct(mebibytes(value, name))


def hosts(value: str | None, name: str) -> list[str]:
    """A node list as the list of its comma-separated parts, brackets kept whole (``n[1,3],m2`` -> 2 parts)."""
    parts, depth, word = [], 0, ""
    for ch in value or "":
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(word)
            word = ""
        else:
            word += ch
    return [p for p in [*parts, word] if p]


def unix_time(value: str | None, name: str) -> int:
    if value is None or not value.strip().isdigit():
        raise ConfigError(f"--{name}={value}: slurmrestd's typed job description takes a UNIX time here",
                          key=f"#SBATCH --{name}", hint=f"give --{name} as seconds since 1970 (date +%s -d ...)")
    return int(value)


def begin(value: str | None, name: str) -> dict[str, Any]:
    return number_struct(unix_time(value, name))


_MAIL = {"TIME_LIMIT": "TIME=100%", "TIME_LIMIT_90": "TIME=90%", "TIME_LIMIT_80": "TIME=80%",
         "TIME_LIMIT_50": "TIME=50%", "INVALID_DEPEND": "INVALID_DEPENDENCY"}
_MAIL_ALL = ["INVALID_DEPENDENCY", "BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT"]  # proc_args.c parse_mail_type


def mail(value: str | None, name: str) -> list[str]:
    out: list[str] = []
    for event in (e.strip().upper() for e in (value or "").split(",") if e.strip()):
        if event == "NONE":
            out = []
        for one in _MAIL_ALL if event == "ALL" else [] if event == "NONE" else [_MAIL.get(event, event)]:
            if one not in out:
                out.append(one)
    return out


def words(value: str | None, name: str) -> list[str]:
    """``append`` -> ``["APPEND"]``; ``Energy,Task`` -> ``["ENERGY", "TASK"]``."""
    return [w.strip().upper() for w in (value or "").split(",") if w.strip()]


# sbatch's long option -> (the field, how its value is written). Options that set more than one field, or a field
# that differs between versions, are below (_special).
FIELDS: dict[str, tuple[str, Convert]] = {
    "account": ("account", text), "acctg-freq": ("account_gather_frequency", text), "array": ("array", text),
    "batch": ("batch_features", text), "begin": ("begin_time", begin), "bb": ("burst_buffer", text),
    "chdir": ("current_working_directory", text), "cluster-constraint": ("cluster_constraint", text),
    "comment": ("comment", text), "constraint": ("constraints", text), "container": ("container", text),
    "contiguous": ("contiguous", yes), "core-spec": ("core_specification", integer),
    "cores-per-socket": ("cores_per_socket", integer), "cpu-freq": ("cpu_frequency", text),
    "cpus-per-task": ("cpus_per_task", integer), "deadline": ("deadline", unix_time),
    "dependency": ("dependency", text), "distribution": ("distribution", text), "error": ("standard_error", text),
    "exclude": ("excluded_nodes", hosts), "hold": ("hold", yes), "input": ("standard_input", text),
    "job-name": ("name", text), "licenses": ("licenses", text), "mail-type": ("mail_type", mail),
    "mail-user": ("mail_user", text), "mcs-label": ("mcs_label", text), "mem": ("memory_per_node", memory),
    "mem-per-cpu": ("memory_per_cpu", memory), "mincpus": ("minimum_cpus_per_node", integer),
    "network": ("network", text), "nice": ("nice", integer), "no-kill": ("kill_on_node_fail", no),
    "no-requeue": ("requeue", no), "nodelist": ("required_nodes", hosts), "nodes": ("nodes", text),
    "ntasks": ("tasks", integer), "ntasks-per-core": ("tasks_per_core", integer),
    "ntasks-per-gpu": ("ntasks_per_tres", integer), "ntasks-per-node": ("tasks_per_node", integer),
    "ntasks-per-socket": ("tasks_per_socket", integer), "open-mode": ("open_mode", words),
    "output": ("standard_output", text), "overcommit": ("overcommit", yes), "partition": ("partition", text),
    "prefer": ("prefer", text), "priority": ("priority", counted), "profile": ("profile", words), "qos": ("qos", text),
    "reboot": ("reboot", yes), "requeue": ("requeue", yes), "reservation": ("reservation", text),
    "sockets-per-node": ("sockets_per_node", integer), "thread-spec": ("thread_specification", integer),
    "threads-per-core": ("threads_per_core", integer), "time": ("time_limit", minutes),
    "time-min": ("time_minimum", minutes), "tmp": ("temporary_disk_per_node", mebibytes), "wckey": ("wckey", text),
}
# the published schemas have no cores_per_socket in these (24.11's v0.0.41, 26.05's v0.0.42-v0.0.44)
MISSING = {"cores-per-socket": frozenset({"v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"})}
# job flags (JOB_FLAGS): the option's flag
FLAGS = {"spread-job": "SPREAD_JOB", "use-min-nodes": "PREFER_MINIMUM_NODE_COUNT"}
# GPUs as TRES (slurm_opt.c): the option -> the field its "gres/gpu:N" goes to
GPU_TRES = {"gpus": "tres_per_job", "gpus-per-node": "tres_per_node", "gpus-per-socket": "tres_per_socket",
            "gpus-per-task": "tres_per_task", "cpus-per-gpu": "cpus_per_tres", "mem-per-gpu": "memory_per_tres",
            "gpu-bind": "tres_bind"}
SPECIAL = frozenset({"gres", "signal", "exclusive", "oversubscribe", "kill-on-invalid-dep", "get-user-env",
                     "wait-all-nodes", *FLAGS, *GPU_TRES})
_SHARED = frozenset({"v0.0.40", "v0.0.41"})  # these have `exclusive` and `oversubscribe`; later ones `shared`


def takes(name: str, version: str) -> bool:
    """Whether `version`'s job description has a field for sbatch's --`name`."""
    return (name in FIELDS or name in SPECIAL) and version not in MISSING.get(name, ())


def _gres(value: str | None) -> str:
    """``gpu:1,tmp:2`` -> ``gres/gpu:1,gres/tmp:2`` (gres.c gres_prepend_tres_type)."""
    return ",".join(p if p.startswith("gres/") else f"gres/{p}" for p in (value or "").split(",") if p)


def _signal(job: dict[str, Any], value: str | None) -> None:
    """``[R][B]:SIG[@SECONDS]`` (proc_args.c get_signal_opts; 60 s when no time is given)."""
    m = re.fullmatch(r"(?i)(R?)(B?)(R?):?([A-Za-z0-9]+)(?:@(\d+))?", (value or "").strip())
    if not m:
        raise _bad("signal", value, "[R][B]:SIGNAL[@SECONDS]")
    flags = (["BATCH_JOB"] if m.group(2) else []) + (["RESERVATION_JOB"] if m.group(1) or m.group(3) else [])
    job["kill_warning_signal"] = m.group(4).upper()
    job["kill_warning_delay"] = number_struct(int(m.group(5) or 60))
    if flags:
        job["kill_warning_flags"] = flags


def _exclusive(job: dict[str, Any], value: str | None, version: str) -> None:
    """--exclusive[=user|mcs|topo] (slurm_opt.c arg_set_exclusive): `exclusive` to v0.0.41, `shared` after."""
    how = (value or "exclusive").lower()
    if how not in ("exclusive", "user", "mcs", "topo"):
        raise _bad("exclusive", value, "one of user, mcs, topo (or no value)")
    if version in _SHARED:
        job["exclusive"] = ["true" if how == "exclusive" else how]
    else:
        job["shared"] = ["none" if how == "exclusive" else how]


def describe(options: list[tuple[str, str | None]], env: dict[str, str], version: str) -> dict[str, Any]:
    """The job fields of (option name, value) pairs, later ones winning; `env` gets what belongs in the environment."""
    job: dict[str, Any] = {}
    tres: dict[str, dict[str, str]] = {}  # field -> source option -> value, joined in sbatch's order at the end
    flags: dict[str, str] = {}
    for name, value in options:
        if name in FIELDS:
            key, convert = FIELDS[name]
            job[key] = convert(value, name)
        elif name in GPU_TRES:
            amount = str(mebibytes(value, name)) if name == "mem-per-gpu" else value or ""
            tres.setdefault(GPU_TRES[name], {})[name] = f"gres/gpu:{amount}"
        elif name == "gres":
            tres.setdefault("tres_per_node", {})[name] = _gres(value) if (value or "").lower() != "none" else ""
        elif name == "signal":
            _signal(job, value)
        elif name == "exclusive":
            _exclusive(job, value, version)
        elif name == "oversubscribe":
            if version in _SHARED:
                job["oversubscribe"] = True
            else:
                job["shared"] = ["oversubscribe"]
        elif name in FLAGS:
            flags[name] = FLAGS[name]
        elif name == "kill-on-invalid-dep":
            flags[name] = ("KILL_INVALID_DEPENDENCY" if (value or "yes").lower() in ("yes", "1", "true")
                           else "NO_KILL_INVALID_DEPENDENCY")
        elif name == "get-user-env":
            env["SLURM_GET_USER_ENV"] = "1"
        elif name == "wait-all-nodes":
            job["wait_all_nodes"] = (value or "1").strip() not in ("0", "")
    for key, parts in tres.items():
        order = ["gpus-per-node", "gres"] if key == "tres_per_node" else list(parts)
        joined = ",".join(parts[p] for p in order if parts.get(p))
        if joined:
            job[key] = joined
    if flags:
        job["flags"] = list(dict.fromkeys(flags.values()))
    return job


def environment(env: Mapping[str, str]) -> list[str]:
    """The job's environment as the data_parser takes it: ``["NAME=value", ...]``."""
    return [f"{k}={v}" for k, v in env.items()]
