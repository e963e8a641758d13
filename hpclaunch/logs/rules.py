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
    node_fault: bool = False  # the node is to blame: the hint names it (NODE) and suggests excluding it


# Literal strings, at least one of which is in every line a rule matches. bytes.find (a fast C search)
# picks the few candidate lines with them; the rules' regular expressions then classify those lines.
# (One regular expression with every alternative, run over megabytes of logs, is ~1000x slower in re.)
# Each key costs a pass over the tail of every log: a rule's line that already holds a key ("error:",
# "Error:", "imed out", "EI000", "xit code") needs no key of its own.
SCAN_KEYS: tuple[bytes, ...] = (
    b"Error:", b"Error\n", b"error:", b"Exception:", b"Exception\n", b"imeout", b"imed out", b"ime out",
    b"out of memory", b"Out of memory", b"OUT_OF_MEMORY", b"oom-kill", b"oom_kill", b"Killed", b"EADDRINUSE",
    b"already in use", b"errno: 98", b"server socket", b"DUE TO", b"NODE_FAIL", b"by peer", b"Broken pipe",
    b"ECONNRESET", b"crashing", b"ignal", b"SIG", b"exitcode", b"xit code", b"EL0004", b"EI000",
    b"RESOURCE_EXHAUSTED", b"ACL_ERROR", b"musaError", b"couldn't", b"outgoing traffic", b"ffline",
    b"No module named", b"cannot import", b"not a valid model", b"Cannot find the requested",
    b"Segmentation fault", b"core dumped", b"StepId", b"CANCELLED", b"KeyboardInterrupt", b"aborted",
    b"Fatal Python", b"return code", b"total mem size", b"MTGPU", b"FATAL:", b"not found", b"No such file or directory",
    b"code 127", b"socket interface", b"AF_INET", b"NET/IB", b"ibv_", b"specific port", b"exit with exception",
    b"atchdog", b"NCCL error", b"HCCL error", b"EJ000", b"Xid", b"fallen off", b"ncclRemoteError",
)


def _re(*alternatives: str) -> re.Pattern[bytes]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives).encode())


# A node-local copy's failure as the stager says it (hpclaunch/runtime/node/nodestage.py, envstage.py): its own
# line "hpclaunch: error: node NODE: CAUSE", or a rank's "AssetError: copying X to node-local scratch failed: node
# NODE: CAUSE" (assets.stage node-local). python.stage_fallback shared prints "warning:": no failure.
_STAGED = r"(?:error|Error): (?:[^\n]*? failed: )?node [A-Za-z][\w.-]*: "
_INSTEAD = ("set python.stage: shared (assets.stage: shared for assets), or python.stage_fallback: shared to run "
            "from the shared environment when a node cannot stage it")

RULES: tuple[Rule, ...] = (
    Rule(
        "slurm_timeout",
        "Slurm time limit reached",
        _re(r"DUE TO TIME LIMIT"),
        "go on from the last checkpoint (`hpclaunch resume JOB`, with the same time limit), or submit it again "
        "with more time (--set time=HH:MM:SS, within the partition's max_time)",
        job_level=True,
    ),
    Rule(
        "preempted",
        "preempted by Slurm",
        _re(r"DUE TO PREEMPTION"),
        "a higher-priority job took the nodes; go on from its last checkpoint: `hpclaunch resume JOB` (a job that "
        "resumes from its checkpoints is requeued by itself: checkpoint.resumable)",
        job_level=True,
    ),
    Rule(
        "node_fail",
        "a node failed",
        _re(r"DUE TO NODE FAIL", r"\bNODE_FAIL\b"),
        "a node died or lost contact; go on from the last checkpoint (`hpclaunch resume JOB`) and tell the "
        "administrators if it repeats",
        job_level=True,
    ),
    Rule(
        "cancelled",
        "cancelled by a user",
        _re(r"CANCELLED AT \S+ \*\*\*", r"CANCELLED (?:by|BY) \w+"),
        "nothing failed: the job was cancelled (scancel) by its owner or an administrator; `hpclaunch resume JOB` "
        "goes on from the last checkpoint",
        primary=False,
        job_level=True,
    ),
    Rule(
        "stage_tool_missing",
        "squashfs-tools are missing on NODE (node-local python environment)",
        _re(_STAGED + r"(?:un|mk)squashfs is not installed"),
        "install squashfs-tools (mksquashfs, unsquashfs) on NODE and on the node that runs the job script "
        "(Debian/Ubuntu: apt install squashfs-tools, or a module in the profile's modules.load); or " + _INSTEAD,
        node_fault=True,
    ),
    Rule(
        "stage_pack_failed",
        "packing the python environment into the asset store failed",
        _re(_STAGED + r"mksquashfs ", r"packs a venv or conda environment; ",
            r"packing the python environment for python\.stage node-local failed"),
        "the line above says why (the store's envs/ folder full or read-only, mksquashfs failed, or the job's python "
        "runs in no venv or conda environment): fix that and submit again; or " + _INSTEAD,
    ),
    Rule(
        "stage_no_space",
        "not enough local scratch on NODE for the node-local copy",
        _re(_STAGED + r"[^\n]*(?:GiB free, the copy needs|No space left on device)"),
        "NODE's local scratch cannot hold the copy (the error says what is free and what it needs): free space "
        "there, or point the profile's node_scratch (container images: container.stage_dir) at a node-local disk "
        "with room on every node; or submit again without NODE (--exclude NODE); or " + _INSTEAD,
        node_fault=True,
    ),
    Rule(
        "stage_image_corrupt",
        "the packed python environment is damaged (unpacking it on NODE failed)",
        _re(_STAGED + r"unsquashfs [^\n]*(?:corrupt|superblock|failed because EOF|failed to read|[Ii]nvalid)"),
        "remove the image the error names and its .json record beside it (the asset store's envs/ folder): the "
        "next job packs the environment again; or " + _INSTEAD,
    ),
    Rule(
        "stage_copy_failed",
        "the node-local copy failed on NODE",
        _re(_STAGED),
        "the error says why; nothing half-written is used (the next job copies again): check that the profile's "
        "node_scratch is a writable node-local folder on NODE, or submit again without NODE (--exclude NODE); or "
        + _INSTEAD,
        node_fault=True,
    ),
    Rule(
        "hpclaunch_error",
        "hpclaunch stopped the job",
        _re(r"^\s*" + RANK_PREFIX.decode() + r"hpclaunch: error: "),
        "the message above is hpclaunch's own: fix the setting it names in the profile or recipe and submit again",
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
            r"(?:CUDA|MUSA) error: out of memory",
            r"Cuda failure 'out of memory'",
            r"Memory_Allocation_Failure",
            r"is more than total mem size",
        ),
        "lower the micro-batch size (--set train.micro_batch_size=N) and raise gradient accumulation, "
        "turn on activation checkpointing, or use ZeRO stage 3 / offload",
    ),
    Rule(
        "device_fault",
        "a device or driver fault",
        _re(
            r"(?:CUDA|MUSA|HIP) error: (?:an illegal memory access|unspecified launch failure|unknown error"
            r"|uncorrectable ECC error|an illegal instruction|misaligned address|device not ready)",
            r"MUSA error: ",
            r"MTGPU:\s*\(Error\)",
            r"(?:Guilty|Innocent) Lockup",
            r"uncorrectable ECC error",
            r"NVRM: Xid \(PCI:[^)]*\): \d+",
            r"fallen off the bus",
        ),
        "a device or its driver failed on NODE: go on without it (`hpclaunch resume JOB --exclude NODE`) and tell the "
        "administrators (`dmesg` shows Xid/MTGPU errors); if it follows you to other nodes, rerun with "
        "CUDA_LAUNCH_BLOCKING=1 (MUSA_LAUNCH_BLOCKING=1) to find the kernel",
        node_fault=True,
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
            r"return code = -9\b",
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
            r"listen on ip\[[^\]]*\] and specific port\[\d+\] fail",
        ),
        "another process on the node holds the port (a stale rank or another job): find it with "
        "`ss -ltnp` on the node and end it, or resubmit (the job's MASTER_PORT derives from its job id)",
    ),
    Rule(
        "container_failed",
        "the container did not start",
        _re(
            r"pyxis: (?:couldn't start container|container start failed|failed to import|child \d+ failed)",
            r"spank_pyxis\.so",
            r"enroot-[\w-]+: fail",
            r"hooks\.d/\S+ exited with return code",
            r"nvidia-container-cli: [\w ]*error",
            r"FATAL:\s+(?:container creation failed|while |could not |failed )",
        ),
        "the container runtime (pyxis/enroot/apptainer) failed before the job's command ran; its own words are "
        "above: check the profile's container image (imported or pullable from the node), that its runtime "
        "paths (ENROOT_RUNTIME_PATH, ENROOT_DATA_PATH, APPTAINER_TMPDIR) are writable there, and the image's "
        "entrypoint/shell",
    ),
    Rule(
        "command_not_found",
        "a program or the Python environment was not found",
        _re(
            r": command not found",
            r"execve\(\): [^:\n]+: No such file or directory",
            r"line \d+: \S+: No such file or directory",
            r"bin/activate: No such file or directory",
            r"^\S+: \d+: \S+: not found",
            r"[Ee]xit(?:ed with exit)? code:? 127\b",
            r"exitcode\s*:\s*127\b",
            r"exited with code 127\b",  # the job script's "launch exited with code 127": the shell's not-found code
        ),
        "the job could not find a program (the launcher, python, a module command) or its environment on the "
        "compute node: check the profile's python env / modules (the activate path, `module load`), and that "
        "they exist on the nodes (`srun -N1 bash -lc 'which python torchrun'`)",
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
        "network_fault",
        "a network (InfiniBand/RoCE) error",
        _re(
            r"NET/IBP? ?:\s*Got completion",
            r"NCCL WARN NET/IB[^\n]*(?:[Ee]rror|failed)",
            r"transport retry counter exceeded",
            r"\bibv_\w+ failed",
        ),
        "a NIC or link failed on NODE or between it and its peer: go on without it (`hpclaunch resume JOB "
        "--exclude NODE`) and tell the administrators (`ibstat`, the port's link state on the node)",
        node_fault=True,
    ),
    Rule(
        "network_interface",
        "no usable network interface",
        _re(
            r"no socket interface found",
            r"neither AF_INET",
            r"NCCL_SOCKET_IFNAME[^\n]*not found",
        ),
        "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME names an interface the node does not have: list them with "
        "`ip -br addr` on a compute node and set the profile's interface (a name, a prefix such as `ib`, or "
        "a comma list)",
    ),
    Rule(
        "rendezvous_failed",
        "could not reach the rendezvous on the head node",
        _re(
            r"client socket has timed out after \d+ms while trying to connect to",
            r"TCP client failed to connect",
            r"DistNetworkError",
            r"retriev\w* ncclUniqueId from \[\d+\] via c10d key-value store",
            r"Rendezvous\w*(?:Timeout|Connection|Closed)Error",
            r"DistStoreError",
        ),
        "ranks could not connect to the head node's store (MASTER_ADDR:MASTER_PORT): check that the head node "
        "started (its rank 0 log), that the address resolves to an interface the other nodes reach (the "
        "profile's GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME), and that no firewall blocks the port",
    ),
    Rule(
        "collective_timeout",
        "a collective operation timed out",
        _re(
            r"Watchdog caught collective operation timeout",
            r"collective operation timeout",
            r"Some NCCL operations have failed or timed out",
            r"Timeout at NCCL work: \d+",
            r"failure detected by watchdog at work",
            r"watchdog got stuck for \d+ seconds",
            r"timed out in blocking wait",
            r"NCCL[^\n]{0,80}[Tt]ime ?out",
            r"(?i:hccl[^\n]{0,80}time ?out)",
            r"Getting socket times out",
            r"\bEI000[26]\b",
            r"[Gg]loo[^\n]{0,120}[Tt]imed? ?out",
            r"Timed out (?:after|waiting)",
            r"timed out after \d+",
            r"wait timeout",
        ),
        "one rank stopped taking part (crashed, hung or is much slower): look at the first failing rank; "
        "if none failed, check the network between nodes (NCCL_DEBUG=INFO) or raise the collective timeout",
        primary=False,
    ),
    Rule(
        "collective_error",
        "the collective library (NCCL/HCCL) failed",
        _re(
            r"NCCL error[^\n]*(?:unhandled system error|internal error|unhandled cuda error|invalid usage)",
            r"nccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error",
            r"HCCL error in:",
            r"\bEJ000\d\b",
        ),
        "NCCL/HCCL failed on this rank: the lines after it (`Last error:`) say why; a socket or connection "
        "error points at the network (the profile's NCCL_SOCKET_IFNAME / HCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO), "
        "HCCL EJ0001 at a process of an earlier job still holding the NPU (check `npu-smi info` on the node), "
        "an internal error at a NCCL/driver mismatch (NCCL_DEBUG=WARN names it)",
    ),
    Rule(
        "msrun_worker_failed",
        "an msrun worker exited with an error",
        _re(r"Worker process \d+ exit with exception"),
        "msrun saw a worker fail: its own log says why (`hpclaunch logs JOB --tail 50`, the files "
        "logs/msrun/node<K>.restart-<N>/worker_<R>.log)",
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
            r"remote process exited or there was a network error",
            r"ncclRemoteError",
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
        "bad_arguments",
        "the script refused its command-line arguments",
        _re(r"^\s*" + RANK_PREFIX.decode() + r"[\w.-]+: error: (?:unrecognized arguments|the following arguments "
            r"are required|argument [^\n]*?: (?:invalid|expected|ambiguous|not allowed))"),
        "its own argument parser said so before it started: the arguments come from the recipe's `args` (or `-- ARGS` "
        "after `submit SCRIPT.py`); a recipe key such as the learning rate goes in --set train.lr=3e-4, not in a flag "
        "(`hpclaunch recipes show RECIPE` lists the keys)",
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
