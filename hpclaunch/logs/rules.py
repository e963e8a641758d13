"""What a failure looks like in a log, and what to do about it. One table, tried in order: the first
rule whose pattern matches a line classifies it. `primary` rules are causes; secondary ones are the
cascade that follows a failure elsewhere (peers losing their connection, launchers tearing down)."""

from __future__ import annotations

import re
from dataclasses import dataclass

RANK_PREFIX = rb"(?:\[rank\d+\]:\s*)*"


@dataclass(frozen=True)
class Rule:
    name: str
    title: str
    pattern: re.Pattern[bytes]
    hint: str
    primary: bool = True
    job_level: bool = False  # a verdict about the whole job (Slurm ended it), not about one rank


# Literal strings, at least one of which is in every line a rule matches. bytes.find (a fast C search)
# picks the few candidate lines with them; the rules' regular expressions then classify those lines.
# (One regular expression with every alternative, run over megabytes of logs, is ~1000x slower in re.)
SCAN_KEYS: tuple[bytes, ...] = (
    b"Error:", b"Error\n", b"error:", b"Exception:", b"Exception\n", b"imeout", b"imed out", b"ime out",
    b"out of memory", b"Out of memory", b"OUT_OF_MEMORY", b"oom-kill", b"oom_kill", b"Killed", b"EADDRINUSE",
    b"already in use", b"errno: 98", b"server socket", b"DUE TO", b"NODE_FAIL", b"by peer", b"Broken pipe",
    b"ECONNRESET", b"crashing", b"ignal", b"SIG", b"exitcode", b"xit code", b"EL0004", b"EI000",
    b"RESOURCE_EXHAUSTED", b"ACL_ERROR", b"musaError", b"couldn't", b"outgoing traffic", b"ffline",
    b"No module named", b"cannot import", b"not a valid model", b"Cannot find the requested",
    b"Segmentation fault", b"core dumped", b"StepId", b"CANCELLED AT", b"KeyboardInterrupt", b"aborted",
    b"Fatal Python",
)


def _re(*alternatives: str) -> re.Pattern[bytes]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives).encode())


RULES: tuple[Rule, ...] = (
    Rule(
        "slurm_timeout",
        "Slurm time limit reached",
        _re(r"DUE TO TIME LIMIT"),
        "ask for more time (--set time=HH:MM:SS, within the partition's max_time) or resume from the "
        "last checkpoint",
        job_level=True,
    ),
    Rule(
        "preempted",
        "preempted by Slurm",
        _re(r"DUE TO PREEMPTION"),
        "a higher-priority job took the nodes; submit with requeue so it resumes from its checkpoint",
        job_level=True,
    ),
    Rule(
        "node_fail",
        "a node failed",
        _re(r"DUE TO NODE FAIL", r"\bNODE_FAIL\b"),
        "a node died or lost contact; resubmit (it resumes from the last checkpoint) and tell the "
        "administrators if it repeats",
        job_level=True,
    ),
    Rule(
        "device_oom",
        "device out of memory",
        _re(
            r"CUDA out of memory",
            r"OutOfMemoryError",
            r"(?:NPU|MUSA|HIP|XPU) out of memory",
            r"out of memory on device",
            r"ACL_ERROR_RT_MEMORY_ALLOCATION",
            r"\bEL0004\b",
            r"RESOURCE_EXHAUSTED",
            r"musaErrorMemoryAllocation",
        ),
        "lower the micro-batch size (--set train.micro_batch_size=N) and raise gradient accumulation, "
        "turn on activation checkpointing, or use ZeRO stage 3 / offload",
    ),
    Rule(
        "host_oom",
        "killed by the kernel's out-of-memory killer",
        _re(
            r"oom[-_]kill",
            r"OUT_OF_MEMORY",
            r"Out of memory: Killed process",
            r"^\s*Killed\s*$",
            r"\bMemoryError\b",
            r"exitcode\s*:\s*-9\b",
            r"Signal 9 \(SIGKILL\)",
        ),
        "the node ran out of host memory: ask for more memory per node, use fewer data-loader workers "
        "or ranks per node, or stream the dataset",
    ),
    Rule(
        "port_in_use",
        "address already in use",
        _re(
            r"Address already in use",
            r"EADDRINUSE",
            r"errno: 98\b",
            r"server socket has failed to (?:listen|bind)",
        ),
        "another process on the node holds the port (a stale rank or another job): find it with "
        "`ss -ltnp` on the node and end it, or resubmit (the job's MASTER_PORT derives from its job id)",
    ),
    Rule(
        "asset_missing",
        "a model, tokenizer or dataset is not in the offline store",
        _re(
            r"AssetError",
            r"We couldn't connect to",
            r"LocalEntryNotFoundError",
            r"outgoing traffic has been disabled",
            r"OfflineModeIsEnabled",
            r"offline mode is enabled",
            r"Cannot find the requested files in the local cache",
            r"couldn't find them in the cached files",
            r"is not a local folder and is not a valid model identifier",
        ),
        "compute nodes are offline: stage the assets on a machine with internet "
        "(`hpclaunch stage-assets RECIPE --profile PROFILE`) and check the store path in the profile",
    ),
    Rule(
        "module_missing",
        "a Python module is missing",
        _re(r"ModuleNotFoundError", r"ImportError\b", r"No module named", r"cannot import name"),
        "install the package into the job's Python environment (the profile's python env / modules), "
        "or check that the job activates the environment you expect",
    ),
    Rule(
        "segfault",
        "a process crashed",
        _re(r"Segmentation fault", r"\bSIGSEGV\b", r"core dumped", r"Fatal Python error", r"\bSIGABRT\b"),
        "a native crash: check driver/library versions on the node; rerun with CUDA_LAUNCH_BLOCKING=1 "
        "or faulthandler for a stack",
    ),
    Rule(
        "collective_timeout",
        "a collective operation timed out",
        _re(
            r"Watchdog caught collective operation timeout",
            r"collective operation timeout",
            r"NCCL[^\n]{0,80}[Tt]ime ?out",
            r"HCCL[^\n]{0,80}[Tt]ime ?out",
            r"\bEI000[26]\b",
            r"[Gg]loo[^\n]{0,120}[Tt]imed? ?out",
            r"DistStoreError[^\n]*[Tt]imed? ?out",
            r"Timed out (?:after|waiting)",
            r"timed out after \d+",
            r"wait timeout",
        ),
        "one rank stopped taking part (crashed, hung or is much slower): look at the first failing rank; "
        "if none failed, check the network between nodes (NCCL_DEBUG=INFO) or raise the collective timeout",
        primary=False,
    ),
    Rule(
        "peer_failed",
        "lost a peer",
        _re(
            r"Connection closed by peer",
            r"Connection reset by peer",
            r"Broken pipe",
            r"ECONNRESET",
            r"remote worker crashing",
            r"ChildFailedError",
            r"SignalException",
            r"closing signal SIG",
            r"Received \d+ death signal",
            r"communicator was aborted",
            r"Terminating StepId",
            r"\bKeyboardInterrupt\b",
            r"exitcode\s*:\s*(?:143|-15)\b",
            r"CANCELLED AT",
            r"srun: error:",
            r"failed \(exitcode: -?\d+\)",
            r"Exited with exit code",
            r"launch exited with code",
        ),
        "a consequence of a failure elsewhere",
        primary=False,
    ),
    Rule(
        "python_error",
        "the training script raised an exception",
        _re(
            r"^\s*"
            + RANK_PREFIX.decode()
            + r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b(?::[^\n]*)?$"
        ),
        "read the traceback above this line in the rank's log (`hpclaunch logs JOB --rank R --tail 50`)",
    ),
)

BY_NAME = {r.name: r for r in RULES}

ALL_KEYS = SCAN_KEYS
_CLASSIFY = tuple((r, re.compile(r.pattern.pattern, re.MULTILINE)) for r in RULES)


def classify(line: bytes) -> Rule | None:
    for rule, pattern in _CLASSIFY:
        if pattern.search(line):
            return rule
    return None
