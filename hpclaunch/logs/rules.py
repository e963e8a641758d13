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


def _re(*alternatives: str) -> re.Pattern[bytes]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives).encode())


RULES: tuple[Rule, ...] = (
    Rule("slurm_timeout", "Slurm time limit reached", _re(r"DUE TO TIME LIMIT"),
         "ask for more time (--set time=HH:MM:SS, within the partition's max_time) or resume from the "
         "last checkpoint", job_level=True),
    Rule("preempted", "preempted by Slurm", _re(r"DUE TO PREEMPTION"),
         "a higher-priority job took the nodes; submit with requeue so it resumes from its checkpoint",
         job_level=True),
    Rule("node_fail", "a node failed", _re(r"DUE TO NODE FAIL", r"\bNODE_FAIL\b"),
         "a node died or lost contact; resubmit (it resumes from the last checkpoint) and tell the "
         "administrators if it repeats", job_level=True),
    Rule("device_oom", "device out of memory",
         _re(r"CUDA out of memory", r"OutOfMemoryError", r"(?:NPU|MUSA|HIP|XPU) out of memory",
             r"out of memory on device", r"ACL_ERROR_RT_MEMORY_ALLOCATION", r"\bEL0004\b",
             r"RESOURCE_EXHAUSTED", r"musaErrorMemoryAllocation"),
         "lower the micro-batch size (--set train.micro_batch_size=N) and raise gradient accumulation, "
         "turn on activation checkpointing, or use ZeRO stage 3 / offload"),
    Rule("host_oom", "killed by the kernel's out-of-memory killer",
         _re(r"oom[-_]kill", r"OUT_OF_MEMORY", r"Out of memory: Killed process", r"^\s*Killed\s*$",
             r"\bMemoryError\b", r"exitcode\s*:\s*-9\b", r"Signal 9 \(SIGKILL\)"),
         "the node ran out of host memory: ask for more memory per node, use fewer data-loader workers "
         "or ranks per node, or stream the dataset"),
    Rule("port_in_use", "address already in use",
         _re(r"Address already in use", r"EADDRINUSE", r"errno: 98\b",
             r"server socket has failed to (?:listen|bind)"),
         "another process on the head node holds MASTER_PORT: end the stale process (or job) or "
         "resubmit so the job gets another port (`--set env.MASTER_PORT=...` in the profile env)"),
    Rule("asset_missing", "a model, tokenizer or dataset is not in the offline store",
         _re(r"AssetError", r"We couldn't connect to", r"LocalEntryNotFoundError",
             r"outgoing traffic has been disabled", r"OfflineModeIsEnabled", r"offline mode is enabled",
             r"Cannot find the requested files in the local cache", r"couldn't find them in the cached files",
             r"is not a local folder and is not a valid model identifier"),
         "compute nodes are offline: stage the assets on a machine with internet "
         "(`hpclaunch stage-assets RECIPE --profile PROFILE`) and check the store path in the profile"),
    Rule("module_missing", "a Python module is missing",
         _re(r"ModuleNotFoundError", r"ImportError\b", r"No module named", r"cannot import name"),
         "install the package into the job's Python environment (the profile's python env / modules), "
         "or check that the job activates the environment you expect"),
    Rule("segfault", "a process crashed",
         _re(r"Segmentation fault", r"\bSIGSEGV\b", r"core dumped", r"Fatal Python error", r"\bSIGABRT\b"),
         "a native crash: check driver/library versions on the node; rerun with CUDA_LAUNCH_BLOCKING=1 "
         "or faulthandler for a stack"),
    Rule("collective_timeout", "a collective operation timed out",
         _re(r"Watchdog caught collective operation timeout", r"collective operation timeout",
             r"NCCL[^\n]{0,80}[Tt]ime ?out", r"HCCL[^\n]{0,80}[Tt]ime ?out", r"\bEI000[26]\b",
             r"[Gg]loo[^\n]{0,120}[Tt]imed? ?out", r"DistStoreError[^\n]*[Tt]imed? ?out",
             r"Timed out (?:after|waiting)", r"timed out after \d+", r"wait timeout"),
         "one rank stopped taking part (crashed, hung or is much slower): look at the first failing rank; "
         "if none failed, check the network between nodes (NCCL_DEBUG=INFO) or raise the collective timeout",
         primary=False),
    Rule("peer_failed", "lost a peer",
         _re(r"Connection closed by peer", r"Connection reset by peer", r"Broken pipe", r"ECONNRESET",
             r"remote worker crashing", r"ChildFailedError", r"SignalException", r"closing signal SIG",
             r"Received \d+ death signal", r"communicator was aborted", r"Terminating StepId",
             r"\bKeyboardInterrupt\b", r"exitcode\s*:\s*(?:143|-15)\b", r"CANCELLED AT", r"srun: error:",
             r"failed \(exitcode: -?\d+\)", r"Exited with exit code", r"launch exited with code"),
         "a consequence of a failure elsewhere", primary=False),
    Rule("python_error", "the training script raised an exception",
         _re(r"^\s*" + RANK_PREFIX.decode() + r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b(?::[^\n]*)?$"),
         "read the traceback above this line in the rank's log (`hpclaunch logs JOB --rank R --tail 50`)"),
)

BY_NAME = {r.name: r for r in RULES}

# Any line worth classifying: the union of every rule (one pass over the bytes).
CANDIDATE = re.compile(b"|".join(b"(?:" + r.pattern.pattern + b")" for r in RULES), re.MULTILINE)
_CLASSIFY = tuple((r, re.compile(r.pattern.pattern, re.MULTILINE)) for r in RULES)


def classify(line: bytes) -> Rule | None:
    for rule, pattern in _CLASSIFY:
        if pattern.search(line):
            return rule
    return None
