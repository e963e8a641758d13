"""sbatch options from the command line: `submit --sbatch KEY=VALUE` (checked against sbatch's long options)
and `submit --after JOB[:ok|any|notok]` (Slurm's --dependency). Imports nothing heavy: resolve and the CLI use it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.config.notify import MailSpec

# sbatch's long options (Slurm 20.11 to 24.x, `man sbatch`), without the leading --.
KNOWN = frozenset("""
account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container
container-id contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot
dependency distribution error exclude exclusive export export-file extra extra-node-info get-user-env gid
gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags hint hold ignore-pbs input
job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus
network nice no-kill no-requeue nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node
ntasks-per-socket open-mode output overcommit oversubscribe parsable partition power prefer priority profile
propagate qos quiet reboot requeue reservation resv-ports segment signal sockets-per-node spread-job switches
test-only thread-spec threads-per-core time time-min tmp tres-bind tres-per-task uid use-min-nodes verbose wait
wait-all-nodes wckey wrap
""".split())

# Options hpclaunch writes itself from its own flags and the profile: name -> where to say it instead.
OWNED = {
    "job-name": "submit --name",
    "partition": "submit --partition",
    "nodes": "submit --nodes or --layout",
    "ntasks": "the layout (one task per node; the launcher starts the ranks)",
    "ntasks-per-node": "the layout (one task per node; the launcher starts the ranks)",
    "cpus-per-task": "--set resources.cpus_per_task=N (CPUs per node; default: the devices' share of the node's)",
    "gres": "the profile's partitions.<name>.gres and submit --gpus-per-node",
    "time": "submit --time",
    "output": "nothing: the job's output goes to its run directory (hpclaunch logs)",
    "error": "nothing: the job's output goes to its run directory (hpclaunch logs)",
    "open-mode": "nothing: the job's output is appended across requeues",
    "array": "submit --sweep",
    "dependency": "submit --after JOB[:ok|any|notok]",
    "wrap": "nothing: hpclaunch submits its own job script",
    "parsable": "nothing: it is how hpclaunch reads the job id",
    "wait": "submit --follow",
    "test-only": "submit --dry-run",
}

# sbatch --mail-type's events (Slurm 20.11 to 24.x, `man sbatch`)
MAIL_TYPES = ("NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
              "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS")


def mail_options(mail: MailSpec | None) -> dict[str, str | None]:
    """notify.mail as sbatch's --mail-type (its events checked) and --mail-user."""
    if mail is None:
        return {}
    events = [event.upper() for event in mail.type]
    unknown = [e for e, event in zip(mail.type, events, strict=True) if event not in MAIL_TYPES]
    if unknown:
        raise ConfigError(f"{', '.join(map(repr, unknown))} is not a mail event Slurm knows", key="notify.mail.type",
                          hint=f"give one or more of {', '.join(MAIL_TYPES)}, e.g. notify.mail.type: [END, FAIL]")
    return {"mail-type": ",".join(events), **({"mail-user": mail.user} if mail.user else {})}


# Options sbatch takes instead of one hpclaunch writes: refused as that one is.
INSTEAD_OF = {"cpus-per-gpu": "cpus-per-task"}

_VALUE_BREAK = re.compile(r"[\n\r\0]")

# Options of which sbatch takes one: one given over the others (--sbatch over the profile's sbatch_extra over
# hpclaunch's own) replaces them.
ALTERNATIVES = ({"requeue", "no-requeue"}, {"mem", "mem-per-cpu", "mem-per-gpu"})
MEMORY = frozenset(ALTERNATIVES[1])

# The one signal the job script acts on: USR1 to the batch shell (B:), which passes it on to the ranks (they
# checkpoint and stop) and then requeues the job (or ends it); @SECONDS before the time limit (Slurm: 60 unless
# given, at most 65535).
_SIGNAL = re.compile(r"^B:(?:SIG)?USR1(?:@([0-9]{1,5}))?$", re.IGNORECASE)
SIGNAL_HINT = ("hpclaunch's job script acts on USR1 to the batch shell (checkpoint, then requeue or end): give its "
               "lead time only, --sbatch signal=B:USR1@SECONDS")


def signal_lead(value: str | None) -> int:
    """The seconds before the time limit of ``--signal=B:USR1@SECONDS``; ValueError for another signal (one
    without ``B:`` goes to the job's steps, not to the batch shell that checkpoints and requeues)."""
    m = _SIGNAL.match(value or "")
    if not m or int(m[1] or 60) > 0xFFFF:
        raise ValueError(f"{value!r} is not B:USR1@SECONDS (SECONDS up to 65535)")
    return int(m[1] or 60)


def over(base: dict[str, str | None], given: dict[str, str | None]) -> dict[str, str | None]:
    """`given` over `base`: an option replaces the one of `base` of the same name, and its ALTERNATIVES."""
    replaced = {other for name in given for group in ALTERNATIVES if name in group for other in group}
    return {**{k: v for k, v in base.items() if k not in replaced}, **given}


def parse_sbatch(items: Sequence[str]) -> dict[str, str | None]:
    """``["mem=0", "exclusive", "--mail-type=END"]`` -> ``{"mem": "0", "exclusive": None, "mail-type": "END"}``;
    an unknown option, or one hpclaunch writes itself, is refused naming the flag."""
    out: dict[str, str | None] = {}
    for item in items:
        raw_name, eq, value = item.partition("=")
        name = raw_name.strip().removeprefix("--")
        if name not in KNOWN:
            near = sorted(k for k in KNOWN if k.startswith(name[:3])) if name else []
            raise ConfigError(f"--sbatch {item!r}: {name!r} is not an sbatch option"
                              + (f" (similar: {', '.join(near[:6])})" if near else ""),
                              hint="write KEY=VALUE with an option of `man sbatch` without its --, e.g. "
                                   "--sbatch mem=64G or --sbatch exclusive")
        if name in OWNED:
            raise ConfigError(f"--sbatch {item!r}: hpclaunch writes --{name} itself; use {OWNED[name]}")
        if name in INSTEAD_OF:
            ours = INSTEAD_OF[name]
            raise ConfigError(f"--sbatch {item!r}: sbatch takes it instead of --{ours}, which hpclaunch writes itself; "
                              f"use {OWNED[ours]}")
        if name == "signal":
            try:
                signal_lead(value)
            except ValueError:
                raise ConfigError(f"--sbatch {item!r}: {value!r} is not a signal the job acts on",
                                  hint=SIGNAL_HINT) from None
        if _VALUE_BREAK.search(value):
            raise ConfigError(f"--sbatch {item!r}: the value holds a line break, which an #SBATCH line cannot carry")
        if name == "exclude":  # --exclude NODE[,NODE], given more than once: all of them
            value = join_nodes(out.get(name), value)
        out[name] = value if eq else None
    for group in ALTERNATIVES:
        both = sorted(group & set(out))
        if len(both) > 1:
            raise ConfigError(f"--sbatch {' and '.join(both)}: sbatch takes one of them", hint="keep one")
    return out


_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[0-9,-]+\][A-Za-z0-9._-]*)*$")


def split_nodes(text: str | None) -> list[str]:
    """``a,node[1-3,5],b`` -> ``[a, node[1-3,5], b]``: a comma inside brackets belongs to the range."""
    out, depth, word = [], 0, ""
    for ch in (text or "").strip().strip("'"):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(word.strip())
            word = ""
        else:
            word += ch
    return [w for w in (*out, word.strip()) if w]


def join_nodes(*lists: str | None) -> str:
    """Node lists (``node1,node[3-4]``) as one for --exclude, each node once, in the order given; a word that is
    no node name or range is refused."""
    nodes: list[str] = []
    for given in lists:
        for node in split_nodes(given):
            if not _NODE.match(node):
                raise ConfigError(f"--exclude {given}: {node!r} is not a node name or range (node7, node[1-4])",
                                  hint="give node names as Slurm shows them (sinfo -N), separated by commas")
            if node not in nodes:
                nodes.append(node)
    return ",".join(nodes)


DEPENDENCY_TYPES = {"ok": "afterok", "any": "afterany", "notok": "afternotok"}
_JOB_ID = re.compile(r"^[0-9]+(?:_[0-9]+)?$")


def dependency_option(after: Sequence[str]) -> list[str]:
    """``["123", "456:any"]`` -> ``["--dependency=afterok:123,afterany:456"]`` (every condition must hold); a
    sweep's id waits for all its elements, ``123_4`` for one."""
    conditions = []
    for item in after:
        job, _, kind = item.strip().partition(":")
        kind = kind or "ok"
        if kind not in DEPENDENCY_TYPES or not _JOB_ID.match(job):
            raise ConfigError(f"--after {item!r}: expected JOB[:ok|any|notok] with a Slurm job id (12345, a sweep's "
                              "12345, one element 12345_3)",
                              hint="ok: start once JOB completed; any: once it ended however; notok: only if it failed")
        conditions.append(f"{DEPENDENCY_TYPES[kind]}:{job}")
    return [f"--dependency={','.join(conditions)}"] if conditions else []
