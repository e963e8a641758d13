"""What a failure looks like in a log, and what to do about it. One table, tried in order: the first rule whose
pattern matches a line (and whose `unless` does not) classifies it. Several rows may share a name (one class
said in two strengths, or with an exception for its other rows).

Each class has a place in a taxonomy (`layer`), from the bottom of the stack to the top: hardware; infrastructure
(network, filesystem, scheduler); resources (memory, disk); software (driver, library, package, launch); user code
(data, training, code). A cause lower in it explains failures above it (a device fault makes a Python exception; a
Lustre eviction an OSError), so when two causes are equally specific and equally early, the lower one is named
(hpclaunch.logs.diagnose ranks the evidence).

`primary` rules are causes; the others are the cascade that follows a failure elsewhere (peers losing their
connection, collectives timing out, launchers tearing down). `generic` causes say that something failed but not
what kind of failure (an exception of the script, a native crash, a collective library error): any specific cause
in the same evidence outranks them. `examples` are lines each row must classify (tests/unit/test_diagnose_rules.py
checks them, and that each holds a scan key)."""

from __future__ import annotations

import re
from dataclasses import dataclass

RANK_PREFIX = rb"(?:\[rank\d+\]:\s*)*"
# What launchers and log collectors put before a process's own words: torch's "[rank3]: ", mpirun's
# "[1,3]<stdout>:", TorchX's "[trainer0|0]:", srun --label's "3: ", Ray's "(Worker pid=42) ", a time stamp
ECHO_PREFIX = (
    rb"^(?:\s*(?:\[rank\d+\]: ?|\[\d+,\d+\]<std(?:out|err)>: ?|\[\w+\|\d+\]: ?|\(\w+ pid=\d+\) |\d{1,5}: "
    rb"|\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?: ?[+-]\d\d:?\d\d|Z)?\]?(?: ?\|)? ?))*")

# The taxonomy, bottom to top, and its five groups
LAYERS = ("hardware", "network", "filesystem", "scheduler", "memory", "disk", "driver", "library", "package",
          "launch", "data", "training", "code")
GROUPS = {"hardware": "hardware", "network": "infrastructure", "filesystem": "infrastructure",
          "scheduler": "infrastructure", "memory": "resources", "disk": "resources", "driver": "software",
          "library": "software", "package": "software", "launch": "software", "data": "user code",
          "training": "user code", "code": "user code"}


@dataclass(frozen=True)
class Rule:
    name: str
    title: str
    pattern: re.Pattern[bytes]
    hint: str
    primary: bool = True
    job_level: bool = False  # a verdict about the whole job (Slurm ended it), not about one rank
    node_fault: bool = False  # the node is to blame: the hint names it (NODE) and suggests excluding it
    layer: str = "code"  # the class's place in LAYERS
    generic: bool = False  # a cause of no particular kind: any specific cause outranks it
    unless: re.Pattern[bytes] | None = None  # a line this row matches but must leave to the rows below
    examples: tuple[str, ...] = ()


# Literal strings, at least one of which is in every line a rule matches. bytes.find (a fast C search)
# picks the few candidate lines with them; the rules' regular expressions then classify those lines.
# (One regular expression with every alternative, run over megabytes of logs, is ~1000x slower in re.)
# Each key costs a pass over the tail of every log: a rule's line that already holds a key ("error:",
# "Error:", "imed out", "EI000", "xit code") needs no key of its own. A Python traceback is found by its
# header, and its exception line read whatever it holds (hpclaunch.logs.diagnose).
SCAN_KEYS: tuple[bytes, ...] = (
    # any error, exception or timeout
    b"Error:", b"Error\n", b"error:", b"Exception:", b"Exception\n", b"imeout", b"imed out", b"ime out",
    b"Traceback (most recent call last)", b"FATAL", b"failed", b"Failed",
    # memory
    b"out of memory", b"Out of memory", b"Out Of Memory", b"OUT_OF_MEMORY", b"OutOfMemory", b"oom-kill",
    b"oom_kill", b"Killed", b"emory limit", b"allocate memory", b"bad_alloc", b"ALLOC_FAILED", b"OOM when",
    b"isn't enough", b"MemoryAllocation", b"EL000", b"RESOURCE_EXHAUSTED", b"ACL_ERROR", b"musaError",
    b"total mem size", b"us error", b"hared memory", b"/dev/shm", b"posix_fallocate", b"</torch_",
    # disk and filesystems
    b"o space left", b"ENOSPC", b"Errno 28", b"write failed", b"unexpected pos", b"quota", b"Quota", b"EDQUOT",
    b"ead-only file", b"EROFS", b"tale file", b"tale NFS", b"ESTALE", b"ustre", b"evicted", b"ransport endpoint",
    b"nput/output error", b"GPFS", b"ermission denied",
    # devices and drivers
    b"MTGPU", b"Xid", b"fallen off", b"icore", b"ICORE", b"aivec", b"TASK_ABORT", b"task abort", b"Device_Absent",
    b"heartbeat", b"ECC", b"UCE", b"Memory access fault",
    b"HSA_STATUS", b"NVML", b"Duplicate GPU", b"busy or unavailable", b"kernel image", b"capability",
    b"device function", b"pu architecture", b"code object", b"NoBinaryForGpu", b"insufficient", b"too old",
    b"nsupported toolchain", b"NVIDIA driver", b"GPUs are available", b"CUDA-capable", b"compiled with CUDA",
    b"NVIDIA-SMI", b"driver combination", b"DRIVER_MISMATCH", b"forward compatibility", b"river version",
    # network, collectives, rendezvous
    b"EADDRINUSE", b"already in use", b"errno: 98", b"server socket", b"by peer", b"Broken pipe", b"ECONNRESET",
    b"crashing", b"socket interface", b"AF_INET", b"find address for", b"SOCKET_IFNAME", b"NET/", b"ibv_", b"IBV_",
    b"UCX", b"etry count", b"mlx5", b"specific port", b"atchdog", b"NCCL error", b"NCCL WARN", b"HCCL error",
    b"EJ000", b"EI000", b"ncclRemoteError", b"ismatch", b"onnection refused", b"network addresses", b"MASTER_ADDR",
    b"endezvous", b"Topology build", b"UniqueId",
    # the scheduler, MPI, containers, launch
    b"DUE TO", b"NODE_FAIL", b"StepId", b"CANCELLED", b"create step", b"step creation", b"node configuration",
    b"PMI", b"pmix", b"MPI_Init", b"walltime", b"pyxis", b"enroot-", b"ch-run", b"ch-image", b"rror response",
    b"not found", b"No such file or directory", b"code 127", b"bad interpreter", b"can't open file",
    b"Lmod has detected", b"modulefile", b"exit with exception", b"xit code", b"exitcode", b"return code",
    # signals and crashes
    b"ignal", b"SIG", b"Segmentation fault", b"core dumped", b"Fatal Python", b"aborted", b"KeyboardInterrupt",
    b"llegal instruction", b"loating point exception", b"double free", b"free(): ", b"malloc(): ", b"stack smashing",
    # libraries and packages
    b"GLIBC", b"CXXABI", b"shared object", b"shared librar", b"load library", b"load any of", b"dlopen",
    b"VersionConflict", b"undefined symbol", b"ncompatib", b"NumPy 1", b"requires", b"No module named",
    b"cannot import", b"DistributionNotFound", b"Exit:", b"Exit\n", b"Failure:", b"Unsupported:", b"Iteration",
    # data, assets, tokenizers, training
    b"couldn't", b"Couldn't", b"outgoing traffic", b"ffline", b"not a valid model", b"Cannot find the requested",
    b"service not known", b"name resolution", b"huggingface.co", b"Max retries", b"okenizer", b"sentencepiece",
    b"srcIndex", b"untagged enum", b"ArrowInvalid", b"orrupt", b"truncated", b"magic", b"load key",
    b"Ran out of input", b"central directory", b"BadZipFile", b"HeaderTooLarge", b"hecksum", b"Unable to find",
    b"does not exist", b"doesn't exist", b"num_samples", b"oss scale", b"oss_scale", b"NaN", b"nan", b"NAN",
    b"non-finite",
)


def _re(*alternatives: str) -> re.Pattern[bytes]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives).encode())


# A node-local copy's failure as the stager says it (hpclaunch/runtime/node/nodestage.py, envstage.py): its own
# line "hpclaunch: error: node NODE: CAUSE", or a rank's "AssetError: copying X to node-local scratch failed: node
# NODE: CAUSE" (assets.stage node-local). python.stage_fallback shared prints "warning:": no failure.
_STAGED = r"(?:error|Error): (?:[^\n]*? failed: )?node [A-Za-z][\w.-]*: "
_INSTEAD = ("set python.stage: shared (assets.stage: shared for assets), or python.stage_fallback: shared to run "
            "from the shared environment when a node cannot stage it")
# Lines that name a download from the Hub only in passing, or a rendezvous' own name lookup
_NOT_HUB = r"c10d|TCPStore|MASTER_ADDR|network addresses of|[Rr]endezvous|socket\.cpp|NCCL|HCCL|[Gg]loo|ncclUniqueId"
_NAN = ("the loss diverged: lower the learning rate (--set train.lr=...) or lengthen warm-up (train.warmup_steps), "
        "clip gradients (train.grad_clip), prefer bf16 to fp16 (train.precision), and check the data for empty or "
        "broken samples (a batch with no target tokens gives a NaN mean loss); go on from a checkpoint before it "
        "with the lower learning rate")
_OFFLINE = ("compute nodes are offline: stage the assets on a machine with internet "
            "(`hpclaunch stage-assets RECIPE --profile PROFILE`) and check the store path in the profile")
_ACTIVATION = ("--set train.micro_batch_size=N (smaller) with --set train.grad_accum=M (larger), "
               "--set train.activation_checkpointing=true, or ZeRO-3 / offload (deepspeed.zero_stage=3, "
               "deepspeed.offload_optimizer=true)")

RULES: tuple[Rule, ...] = (
    # --- the scheduler ended the whole job
    Rule(
        "slurm_timeout",
        "Slurm time limit reached",
        _re(r"DUE TO TIME LIMIT", r"[Ee]xceeded (?:its |the )?(?:wall ?clock|time) limit",
            r"walltime \d+ exceeded limit"),
        "go on from the last checkpoint (`hpclaunch resume JOB`, with the same time limit), or submit it again "
        "with more time (--set time=HH:MM:SS, within the partition's max_time)",
        job_level=True, layer="scheduler",
        examples=("slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***",),
    ),
    Rule(
        "preempted",
        "preempted by Slurm",
        _re(r"DUE TO PREEMPTION"),
        "a higher-priority job took the nodes; go on from its last checkpoint: `hpclaunch resume JOB` (a job that "
        "resumes from its checkpoints is requeued by itself: checkpoint.resumable)",
        job_level=True, layer="scheduler",
        examples=("slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO PREEMPTION ***",),
    ),
    Rule(
        "node_fail",
        "a node failed",
        _re(r"DUE TO NODE FAIL", r"\bNODE_FAIL\b", r"[Nn]ode failure on \S+"),
        "a node died or lost contact; go on from the last checkpoint (`hpclaunch resume JOB`, without the node: "
        "--exclude NODE) and tell the administrators if it repeats",
        job_level=True, layer="hardware",
        examples=("srun: error: Node failure on nid00042",
                  "slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO NODE FAILURE ***"),
    ),
    Rule(
        "cancelled",
        "cancelled by a user",
        _re(r"CANCELLED AT \S+ \*\*\*", r"CANCELLED (?:by|BY) \w+"),
        "nothing failed: the job was cancelled (scancel) by its owner or an administrator; `hpclaunch resume JOB` "
        "goes on from the last checkpoint",
        primary=False, job_level=True, layer="scheduler",
    ),
    # --- hpclaunch's own words (node-local staging, its refusals)
    Rule(
        "stage_tool_missing",
        "squashfs-tools are missing on NODE (node-local python environment)",
        _re(_STAGED + r"(?:un|mk)squashfs is not installed"),
        "install squashfs-tools (mksquashfs, unsquashfs) on NODE and on the node that runs the job script "
        "(Debian/Ubuntu: apt install squashfs-tools, or a module in the profile's modules.load); or " + _INSTEAD,
        node_fault=True, layer="package",
    ),
    Rule(
        "stage_pack_failed",
        "packing the python environment into the asset store failed",
        _re(_STAGED + r"mksquashfs ", r"packs a venv or conda environment; ",
            r"packing the python environment for python\.stage node-local failed"),
        "the line above says why (the store's envs/ folder full or read-only, mksquashfs failed, or the job's python "
        "runs in no venv or conda environment): fix that and submit again; or " + _INSTEAD,
        layer="launch", unless=re.compile(rb"\bwarning: "),  # python.stage_fallback shared: no failure
    ),
    Rule(
        "stage_no_space",
        "not enough local scratch on NODE for the node-local copy",
        _re(_STAGED + r"[^\n]*(?:GiB free, the copy needs|No space left on device)"),
        "NODE's local scratch cannot hold the copy (the error says what is free and what it needs): free space "
        "there, or point the profile's node_scratch (container images: container.stage_dir) at a node-local disk "
        "with room on every node; or submit again without NODE (--exclude NODE); or " + _INSTEAD,
        node_fault=True, layer="disk",
    ),
    Rule(
        "stage_image_corrupt",
        "the packed python environment is damaged (unpacking it on NODE failed)",
        _re(_STAGED + r"unsquashfs [^\n]*(?:corrupt|superblock|failed because EOF|failed to read|[Ii]nvalid)"),
        "remove the image the error names and its .json record beside it (the asset store's envs/ folder): the "
        "next job packs the environment again; or " + _INSTEAD,
        layer="data",
    ),
    Rule(
        "stage_copy_failed",
        "the node-local copy failed on NODE",
        _re(_STAGED),
        "the error says why; nothing half-written is used (the next job copies again): check that the profile's "
        "node_scratch is a writable node-local folder on NODE, or submit again without NODE (--exclude NODE); or "
        + _INSTEAD,
        node_fault=True, layer="filesystem",
    ),
    Rule(
        "hpclaunch_error",
        "hpclaunch stopped the job",
        _re(r"^\s*" + RANK_PREFIX.decode() + r"hpclaunch: error: "),
        "the message above is hpclaunch's own: fix the setting it names in the profile or recipe and submit again",
        layer="launch",
    ),
    # --- containers (their runtime's words, before the words they quote: permissions, space, missing files)
    Rule(
        "container_failed",
        "the container did not start",
        _re(
            r"pyxis: (?:couldn't start container|container start failed|failed to import|child \d+ failed)",
            r"spank_pyxis\.so",
            r"enroot-[\w-]+: fail",
            r"hooks\.d/\S+ exited with return code",
            r"nvidia-container-cli: [\w ]*error",
            r"^\s*FATAL:\s{2,}\S",
            r"FATAL:\s+(?:container creation failed|while |could not |failed |[Uu]nable to |image )",
            r"\bch-(?:run|image|convert|fromhost)(?:\[\d+\])?: (?![Ww]arning|note)",
            r"\b(?:apptainer|singularity|enroot|ch-run|podman|docker): command not found",
            r"Error response from daemon",
        ),
        "the container runtime (pyxis/enroot, Apptainer/Singularity, Charliecloud) failed before the job's command "
        "ran; its own words are above: check the profile's container image (imported or pullable from the node), "
        "that its runtime paths (ENROOT_RUNTIME_PATH, ENROOT_DATA_PATH, APPTAINER_TMPDIR) are writable there, and "
        "the image's entrypoint/shell",
        layer="launch",
        examples=("FATAL:   container creation failed: mount hook function failure: destination /x doesn't exist",
                  "ch-run: error: Invalid argument (ch-run.c:519 22)",
                  "docker: Error response from daemon: could not select device driver"),
    ),
    # --- hardware and drivers (before the memory and Python rows their lines also fit)
    Rule(
        "duplicate_gpu",
        "two ranks use the same GPU",
        _re(r"Duplicate GPU detected", r"(?:devices? (?:is|are|is/are) )?busy or unavailable",
            r"cudaErrorDevicesUnavailable", r"both on (?:CUDA|HIP|NPU|MUSA) device"),
        "each rank must drive its own device: select it from LOCAL_RANK before any CUDA call "
        "(torch.cuda.set_device(int(os.environ['LOCAL_RANK']))), do not pin CUDA_VISIBLE_DEVICES to one GPU for "
        "every rank, ask for as many ranks per node as the node has GPUs (--gpus-per-node), and check that no "
        "other process holds the GPUs (exclusive-process mode: `nvidia-smi -q | grep 'Compute Mode'`)",
        layer="launch",
        examples=("init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
                  "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"),
    ),
    Rule(
        "cuda_arch_mismatch",
        "the GPU's architecture is not in the build",
        _re(r"no kernel image is available for execution on the device", r"NoKernelImageForDevice",
            r"with CUDA capability sm_\d+a? is not compatible with the current PyTorch installation",
            r"(?:CUDA|HIP|hip) error: invalid device function", r"hipErrorInvalidDeviceFunction",
            r"hipErrorNoBinaryForGpu", r"[Uu]nable to find code object for all current devices",
            r"[Uu]nsupported gpu architecture", r"no longer supports this GPU because it is too old",
            r"supports? (?:only )?(?:Ampere|Hopper|Turing|Volta|Ada)[^\n]{0,30}(?:or|and) (?:newer|later)",
            r"compute capability (?:of )?(?:at least|>= ?)\s*\d", r"sm_\d+a? is not (?:compatible|supported)",
            r"CUDA capability \d+\.\d+ is not (?:compatible|supported)",
            r"rocBLAS error: Cannot read [^\n]*GPU arch"),
        "install a build that has this GPU's architecture (torch wheels for sm_90 need CUDA >= 11.8, sm_100/sm_120 "
        "CUDA >= 12.8: pip install torch --index-url https://download.pytorch.org/whl/cu128), rebuild compiled "
        "extensions with TORCH_CUDA_ARCH_LIST set to it, or run on the partition whose GPUs the build supports "
        "(the profile's partition / a --constraint)",
        layer="driver",
        examples=("RuntimeError: CUDA error: no kernel image is available for execution on the device",
                  "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
                  "installation.",
                  "RuntimeError: HIP error: invalid device function"),
    ),
    Rule(
        "no_gpu",
        "the rank sees no GPU",
        _re(r"Found no NVIDIA driver on your system", r"No CUDA GPUs are available",
            r"CUDA driver initialization failed, you might not have a CUDA gpu", r"no CUDA-capable device is detected",
            r"Torch not compiled with CUDA enabled", r"NVIDIA-SMI has failed because it couldn't communicate",
            r"(?:No|no) (?:NPU|MUSA|XPU) devices? (?:is |are )?(?:available|found)"),
        "the rank ran where no GPU is visible: the job must ask for GPUs on a GPU partition (the profile's partition "
        "and its gres, --gpus-per-node), nothing may empty CUDA_VISIBLE_DEVICES, and `nvidia-smi` must work on the "
        "node (else tell the administrators); 'Torch not compiled with CUDA enabled' means a CPU-only torch in the "
        "python env: install the CUDA build",
        layer="driver",
        examples=("RuntimeError: No CUDA GPUs are available", "AssertionError: Torch not compiled with CUDA enabled"),
    ),
    Rule(
        "driver_too_old",
        "the node's GPU driver is older than the job's CUDA runtime",
        _re(r"driver version is insufficient for (?:CUDA|MUSA|HIP) runtime version",
            r"cudaErrorInsufficientDriver", r"driver on your system is too old",
            r"provided PTX was compiled with an unsupported toolchain", r"UnsupportedPtxVersion",
            r"unsupported display driver / cuda driver combination", r"SYSTEM_DRIVER_MISMATCH",
            r"forward compatibility was attempted on non supported HW", r"COMPAT_NOT_SUPPORTED_ON_DEVICE",
            r"[Dd]river version [\d.]+ is (?:too old|older than|not supported|insufficient)",
            r"(?:CUDA|NVIDIA|GPU) driver[^\n]{0,40}(?:too old|outdated|insufficient)"),
        "load a CUDA toolkit module the node's driver supports (`module load cuda/X.Y` in the profile's "
        "modules.load; `nvidia-smi` on the node shows the highest CUDA version its driver supports) and a torch "
        "built for that CUDA (pip install torch --index-url https://download.pytorch.org/whl/cuXY), or run on "
        "nodes with a newer driver",
        layer="driver",
        examples=("Test CUDA failure common.cu:1045 'CUDA driver version is insufficient for CUDA runtime version'",
                  "RuntimeError: The NVIDIA driver on your system is too old (found version 11040)."),
    ),
    Rule(
        "device_oom",
        "device out of memory",
        _re(
            r"CUDA out of memory",
            r"OutOfMemoryError",
            r"(?:NPU|MUSA|HIP|XPU|GPU) out of memory",
            r"out of memory on device",
            r"ACL_ERROR_RT_MEMORY_ALLOCATION",
            r"\bEL0004\b",
            r"RESOURCE_EXHAUSTED",
            r"musaErrorMemoryAllocation",
            r"cudaErrorMemoryAllocation",
            r"(?:CUDA|MUSA|HIP) error: out of memory",
            r"Cuda failure 'out of memory'",
            r"Memory_Allocation_Failure",
            r"is more than total mem size",
            r"HIP_ERROR_OutOfMemory", r"hipErrorOutOfMemory", r"CUDA_ERROR_OUT_OF_MEMORY",
            r"failed to allocate [^\n]*(?:from|on) device",
            r"OOM when allocating tensor",
            r"(?:CUBLAS|CUDNN)_STATUS_ALLOC_FAILED",
            r"memory isn't enough and alloc failed",
            r"[Mm]alloc (?:for )?device memory failed",
        ),
        "lower the micro-batch size and raise gradient accumulation (" + _ACTIVATION + "); `hpclaunch plan RECIPE "
        "--profile P` estimates the memory per device",
        layer="memory",
        examples=("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                  "E rocm_driver.cc:606] failed to allocate 1.2GiB (1288490188 bytes) from device: "
                  "HIP_ERROR_OutOfMemory"),
    ),
    Rule(
        "shm_exhausted",
        "shared memory (/dev/shm) ran out",
        _re(r"[Bb]us error", r"\bSIGBUS\b", r"Signal 7\b", r"exitcode\s*:\s*-7\b", r"insufficient shared memory",
            r"out of shared memory", r"shared memory limit", r"creating shared memory segment",
            r"(?:posix_fallocate|ftruncate|shm_open)[^\n]{0,60}(?:failed|No space left|[Ee]rror)",
            r"unable to (?:write to|open|mmap) (?:file|shared memory object) </torch_",
            r"/dev/shm[^\n]{0,80}(?:No space|full|too small|[Ff]ailed|[Ee]rror)",
            r"(?:No space left|full|too small|[Ff]ailed|[Ee]rror)[^\n]{0,80}/dev/shm"),
        # (an open-files limit also fails to open torch's shared memory files: not the space of /dev/shm)
        "/dev/shm holds the DataLoader workers' batches and NCCL's buffers between the ranks of a node: use fewer "
        "workers (--set train.num_workers=2, or 0), give a container a larger /dev/shm (docker/enroot --shm-size; "
        "Apptainer uses the node's), ask for more memory per node (/dev/shm counts against the job's memory), or "
        "set NCCL_SHM_DISABLE=1 for NCCL's segments; `df -h /dev/shm` on the node shows its size",
        layer="memory", unless=re.compile(rb"Too many open files"),
        examples=("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                  "memory (shm).",
                  "srun: error: node7: task 3: Bus error",
                  "include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
                  "RuntimeError: unable to write to file </torch_18692_1954506831>: No space left on device (28)"),
    ),
    Rule(
        "device_fault",
        "a device or driver fault",
        _re(
            r"(?:CUDA|MUSA|HIP) error: (?:an illegal memory access|unspecified launch failure|unknown error"
            r"|uncorrectable ECC error|an illegal instruction|misaligned address|device not ready|GPU is lost"
            r"|the launch timed out and was terminated|hardware stack error)",
            r"cuda runtime error \(\d+\) : (?:unknown error|an illegal memory access|unspecified launch failure"
            r"|uncorrectable ECC)",
            r"MUSA error: ",
            r"MTGPU:\s*\(Error\)",
            r"(?:Guilty|Innocent) Lockup",
            r"uncorrectable (?:ECC )?error", r"ECC error", r"cudaErrorECCUncorrectable", r"\bUCE ERROR",
            r"NVRM: Xid \(PCI:[^)]*\): \d+",
            r"fallen off the bus", r"GPU is lost",
            r"Device_Absent", r"Device not found or invalid", r"[Ll]ost heartbeat", r"heartbeat lost",
            r"Memory access fault by GPU", r"HSA_STATUS_ERROR_(?:MEMORY_APERTURE_VIOLATION|EXCEPTION|HW_EXCEPTION)",
            r"Driver/library version mismatch", r"Failed to initialize NVML",
            r"there is an aicore error|AICORE execution|aivec error", r"DEVICE_TASK_ABORT|device task abort",
        ),
        "a device or its driver failed on NODE: go on without it (`hpclaunch resume JOB --exclude NODE`) and tell the "
        "administrators (`dmesg` shows Xid/MTGPU errors); if it follows you to other nodes, rerun with "
        "CUDA_LAUNCH_BLOCKING=1 (MUSA_LAUNCH_BLOCKING=1) to find the kernel",
        node_fault=True, layer="hardware",
        examples=("Device[1] lost heartbeat.[FUNC:SyncTask][FILE:direct_hwts_engine.cc][LINE:407]",
                  "Memory access fault by GPU node-2 (Agent handle: 0x5) on address 0x7f. Reason: Page not present",
                  "Failed to initialize NVML: Driver/library version mismatch"),
    ),
    Rule(
        "host_oom",
        "killed by the kernel's out-of-memory killer",
        _re(
            r"oom[-_]kill",
            r"OUT_OF_MEMORY",
            r"Out of memory: Kill(?:ed)? process",
            r"Killed process \d+",
            r"[Mm]emory cgroup out of memory",
            r"Out Of Memory\b",
            r"^\s*Killed\s*$", r"tasks? [\d,-]+: Killed\b",
            r"killed by signal: Killed",
            r"[Ee]xceeded (?:job )?memory limit",
            r"\bMemoryError\b",
            r"Cannot allocate memory", r"can't allocate memory", r"std::bad_alloc",
            r"Unable to allocate [\d.]+ [KMGTP]i?B for an array",
            r"exitcode\s*:\s*(?:-9|137)\b",
            r"Signal 9 \(SIGKILL\)",
            r"return code = -9\b",
        ),
        "the node ran out of host memory: ask for more memory (--set resources.mem_per_device=..., the profile's "
        "partition memory), use fewer data-loader workers (--set train.num_workers=N) or ranks per node, or stream "
        "the dataset; `sacct -j JOB -o MaxRSS,ReqMem` shows what it used",
        layer="memory",
        examples=("[rank0]: RuntimeError: DataLoader worker (pid 2637) is killed by signal: Killed.",
                  "[Thu Mar 14 01:57:54 2019] Out of memory: Kill process 89746 (python) score 1031",
                  "slurmstepd: error: Job 42 exceeded memory limit (10485760 > 8388608), being killed",
                  "RuntimeError: [enforce fail at alloc_cpu.cpp:114] DefaultCPUAllocator: can't allocate memory"),
    ),
    # --- filesystems and disks
    Rule(
        "no_space",
        "the filesystem is full (no space left on device)",
        _re(r"No space left on device", r"\bENOSPC\b", r"Errno 28\b", r"[Dd]isk (?:is )?full",
            r"not enough (?:free )?(?:disk )?space", r"file write failed", r"failed writing file",
            r"unexpected pos \d+ vs \d+", r"StorageFull"),
        "the filesystem the job writes to is full: checkpoints and logs go into the run directory (the profile's "
        "run_root): point run_root at a scratch filesystem with room, remove old runs (`hpclaunch clean`), save "
        "fewer checkpoints (--set train.save_every=N); `df -h PATH` (Lustre: `lfs df -h`) shows what is free",
        layer="disk",
        examples=("OSError: [Errno 28] No space left on device",
                  "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 18316224 vs 18316112"),
    ),
    Rule(
        "disk_quota",
        "the disk quota is exceeded",
        _re(r"[Dd]isk quota exceeded", r"\bEDQUOT\b", r"Errno 122\b", r"[Qq]uota (?:has been )?exceeded",
            r"over (?:its |your |the )?(?:disk |block |inode |file )?quota",
            r"exceed(?:s|ed)? (?:your |its |the )?(?:disk |block |inode |file |storage )?quota"),
        "your quota (space or number of files) on that filesystem is used up: `lfs quota -hu $USER PATH` (Lustre) "
        "or `quota -s` shows it; write checkpoints and logs on scratch (the profile's run_root), remove old runs "
        "(`hpclaunch clean`) and caches (HF_HOME, pip), or ask for more quota",
        layer="disk",
        examples=("OSError: [Errno 122] Disk quota exceeded: 'out/intermediate.ntw'",
                  "write error: Disk quota exceeded"),
    ),
    Rule(
        "read_only_fs",
        "the job wrote to a read-only filesystem",
        _re(r"[Rr]ead-only file system", r"\bEROFS\b", r"Errno 30\b"),
        "write outputs under the run directory or scratch (the profile's run_root), and point caches at a writable "
        "folder (HF_HOME, TRITON_CACHE_DIR, XDG_CACHE_HOME, MPLCONFIGDIR); inside a container bind a writable "
        "folder (container.mounts) or use a writable overlay; a filesystem that turned read-only under a running "
        "job is a fault: tell the administrators",
        layer="filesystem",
        examples=("OSError: [Errno 30] Read-only file system: '/package'",),
    ),
    Rule(
        "stale_file_handle",
        "a stale file handle (a shared file changed under the job)",
        _re(r"[Ss]tale (?:NFS )?file handle", r"\bESTALE\b", r"Errno 116\b"),
        "a file was replaced or deleted on the NFS/parallel filesystem while the job had it open (often a cache "
        "shared by several jobs, such as ~/.cache): give each job its own cache on scratch or node-local disk "
        "(HF_HOME, TRITON_CACHE_DIR, TORCH_EXTENSIONS_DIR), do not rewrite the inputs of a running job, and go on "
        "from the last checkpoint (`hpclaunch resume JOB`); on one node only: --exclude NODE",
        layer="filesystem",
        examples=("OSError: [Errno 116] Stale file handle: '/home/u/.cache/x'",),
    ),
    Rule(
        "lustre_error",
        "the shared filesystem failed (Lustre/GPFS I/O error)",
        _re(r"LustreError", r"\bLustre: [^\n]*(?:lost|evict|[Ee]rror|fail|timed out|not responding)",
            r"\b(?:ptlrpc|ldlm)_\w+", r"evicted by ", r"was evicted",
            r"[Cc]annot send after transport endpoint shutdown",
            r"Errno 108\b", r"Transport endpoint is not connected", r"Errno 107\b", r"[Ii]nput/output error",
            r"\bEIO\b", r"Errno 5\]", r"GPFS[^\n]*(?:[Ee]rror|fail|unmount)"),
        "the filesystem, not the files, failed on NODE (an I/O error, an evicted or disconnected client): go on "
        "from the last checkpoint (`hpclaunch resume JOB`, --exclude NODE if it repeats there) and tell the "
        "administrators (`dmesg | grep -i lustre`, `lfs check servers` on the node)",
        node_fault=True, layer="filesystem",
        examples=("LustreError: 11-0: scratch-OST0003-osc: operation ost_write to node 10.0.0.3@o2ib failed: rc = -107",
                  "OSError: [Errno 5] Input/output error: '/lustre/scratch/u/ckpt.pt'",
                  "OSError: [Errno 108] Cannot send after transport endpoint shutdown"),
    ),
    Rule(
        "permission_denied",
        "permission denied",
        _re(r"Permission denied", r"\bEACCES\b", r"Errno 13\b"),
        "the job's user may not write or read that path: write under the run directory or scratch (the profile's "
        "run_root, caches in HF_HOME/TRITON_CACHE_DIR), or fix the path's permissions (`ls -ld PATH`)",
        layer="filesystem",
        unless=re.compile(rb"pyxis|enroot|apptainer|singularity|ch-run|ssh|publickey|slurmstepd"),
        examples=("PermissionError: [Errno 13] Permission denied: '/data/shared/out'",),
    ),
    # --- the scheduler, MPI
    Rule(
        "step_creation_failed",
        "srun could not create the job step",
        _re(r"Unable to create (?:job )?step", r"step creation (?:temporarily |still )?disabled",
            r"[Jj]ob step creation"),
        "the step asks for more than the allocation holds, or an earlier step still holds it: ask the step for "
        "what the job has (srun --mem=0 or --exact, the job's --gres), and check the job's memory and CPUs per "
        "task; 'Requested nodes are busy' means an earlier step has not ended",
        layer="scheduler",
        examples=("srun: error: Unable to create step for job 29986033: Memory required by task is not available",),
    ),
    Rule(
        "node_config_unavailable",
        "no node of the partition fits the request",
        _re(r"Requested node configuration is not available",
            r"(?:Memory|CPU count per node|Node count|cpus-per-task|[Nn]ode) specification (?:can not|cannot) be "
            r"satisfied", r"Node count specification invalid", r"Invalid generic resource \(gres\) specification",
            r"More processors requested than permitted", r"Requested partition configuration not available",
            r"Requested (?:GRES|gres) option unsupported", r"[Tt]oo many (?:gpus|GPUs|nodes|CPUs) requested",
            r"Invalid feature specification"),
        "no node of the partition has what the job asks per node (GPUs, CPUs, memory, features) or there are not "
        "that many nodes: compare the layout (--nodes, --gpus-per-node, cpus and memory per task) with the nodes "
        "(`sinfo -p PARTITION -o '%n %c %m %G %f'`), fix the profile's partition (gpus_per_node, cpus_per_node) "
        "and check it (`hpclaunch profiles check PROFILE`); `submit --dry-run` shows the #SBATCH lines",
        layer="scheduler",
        examples=("sbatch: error: Batch job submission failed: Requested node configuration is not available",),
    ),
    Rule(
        "slurm_refused",
        "Slurm refused the job",
        _re(r"Batch job submission failed: ", r"Unable to allocate resources: ",
            r"Invalid (?:qos|QOS|account|partition)[^\n]*specifi", r"violates accounting/QOS policy"),
        "Slurm's reason is above: fix the profile's partition, account or qos, or the limit it names "
        "(`sacctmgr show assoc user=$USER`, `scontrol show partition PARTITION`), then submit again",
        layer="scheduler",
        examples=("sbatch: error: Batch job submission failed: Invalid account or account/partition combination "
                  "specified",),
    ),
    Rule(
        "pmix_error",
        "the MPI/PMIx layer could not start the tasks",
        _re(r"pmix_init failed", r"PMIx?_Init failed", r"PMIX? ERROR", r"\bPMIx? stopped checking",
            r"\bPMIx?\b[^\n]*(?:[Ee]rror|failed|not found)", r"mpi/pmi\w*", r"\bpmix\w*: ",
            r"[Cc]ouldn't find the specified plugin name for mpi/", r"cannot (?:find|create) mpi (?:plugin|context)",
            r"invalid MPI type", r"without (?:SLURM's )?PMI\w* support", r"SLURM's PMI support",
            r"An error occurred in MPI_Init", r"MPI_Init(?:_thread)? (?:has )?failed",
            r"ompi_(?:mpi|rte)_init[^\n]*failed",
            r"orte_(?:init|ess_init) failed", r"PMI2?_\w+ failed", r"Fatal error in P?MPI_Init",
            r"OPAL ERROR[^\n]*pmix", r"PMI_\w+ returned -?\d+"),
        "srun's --mpi type and the MPI the program was built with must match (`srun --mpi=list` shows what Slurm "
        "offers: pmix, pmi2), and the PMIx/MPI libraries it needs must be on the nodes (load the MPI module in the "
        "profile's modules.load); torchrun and DeepSpeed jobs need no MPI: launch them with srun --mpi=none",
        layer="scheduler",
        examples=("It looks like pmix_init failed for some reason; your parallel process is",
                  "srun: error: Couldn't find the specified plugin name for mpi/pmix looking at all files"),
    ),
    # --- libraries and packages
    Rule(
        "glibc_version",
        "the node's C library (glibc/libstdc++) is older than a binary needs",
        _re(r"version [`'‘]?GLIBC(?:XX)?_[\d.]+['’]? not found", r"version [`'‘]?CXXABI_[\d.]+['’]? not found",
            r"GLIBC(?:XX)?_[\d.]+['’]? not found", r"(?:glibc|GLIBC) (?:version )?[\d.]+ (?:or (?:newer|later) )?"
            r"(?:is )?required"),
        "a binary was built on a newer system than the node: use builds for the node's OS (manylinux2014 wheels, "
        "conda packages) or run in a container with a newer OS (the profile's container); for GLIBCXX/CXXABI "
        "(libstdc++) load a newer GCC module (`module load gcc/...`) or put the conda environment's lib/ on "
        "LD_LIBRARY_PATH; `ldd --version` on the node shows its glibc",
        layer="library",
        examples=("ImportError: /lib64/libc.so.6: version `GLIBC_2.28' not found (required by /tmp/x.so)",
                  "/usr/lib64/libstdc++.so.6: version `GLIBCXX_3.4.29' not found"),
    ),
    Rule(
        "shared_library_missing",
        "a shared library was not found",
        _re(r"cannot open shared object file", r"error while loading shared libraries",
            r"Could not load (?:dynamic )?library", r"Unable to load any of \{",
            r"dlopen(?:\(\))?[^\n]{0,60}(?:failed|No such file|cannot open)", r"cannot find -l\w+"),
        "load the module that provides the library (`module spider NAME`, then the profile's modules.load), "
        "install the pip wheel that ships it into the python env (libcudnn: nvidia-cudnn-cu12, libcudart: "
        "nvidia-cuda-runtime-cu12, libnccl: nvidia-nccl-cu12), or add its folder to LD_LIBRARY_PATH (the "
        "profile's env); another major version (libcudart.so.11 vs .12) means the package was built for another "
        "CUDA: install the build for the node's",
        layer="library",
        unless=re.compile(rb"NET/Plugin|libnccl-net|nccl-net|[Ww]arning|WARNING|dso_loader|libibverbs: |pvrdma"),
        examples=("ImportError: libcudnn.so.8: cannot open shared object file: No such file or directory",
                  "python: error while loading shared libraries: libpython3.10.so.1.0: cannot open shared object"),
    ),
    Rule(
        "nccl_version_mismatch",
        "the ranks disagree on NCCL (versions or collectives differ between nodes)",
        _re(r"collective mismatch error", r"[Mm]ismatch(?:ed)? (?:in )?NCCL version",
            r"NCCL version[^\n]{0,60}mismatch", r"(?:NCCL|RCCL|nccl)[^\n]{0,80}version mismatch",
            r"version mismatch[^\n]{0,60}(?:NCCL|nccl|RCCL)"),
        "run every node from the same environment (the profile's python env and modules; `python -c 'import "
        "torch; print(torch.cuda.nccl.version())'` on each node must agree) and do not mix NCCL plugins or "
        "LD_LIBRARY_PATH copies of libnccl; if the versions agree, find the collective the ranks call differently "
        "with TORCH_DISTRIBUTED_DEBUG=DETAIL",
        layer="library",
        examples=("NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size "
                  "496640 remote size 65536",),
    ),
    Rule(
        "package_version",
        "an installed package has the wrong version",
        _re(r"VersionConflict", r"is required for a normal functioning of this module, but found",
            r"requires [\w.\[\]-]+ ?(?:[<>=!~]=?|version )[^\n]*but (?:you have|found|[\w.-]+ is installed)",
            r"but you have [\w.-]+ [\w.+]+ which is incompatible", r"[Ii]ncompatible (?:versions?|package)",
            r"(?<!NCCL )version (?:mismatch|conflict)", r"undefined symbol",
            r"compiled using NumPy 1\.x cannot be run in", r"numpy\.dtype size changed", r"binary incompatibility",
            r"compiled with different CUDA (?:major )?versions", r"mismatches the version that was used to compile",
            r"(?:requires|needs) (?:a )?(?:newer|older) version of", r"cannot import name ['`‘][\w.]+['’`] from",
            r"module ['`][\w.]+['`] has no attribute", r"(?:requires|needs) `?[\w.-]+ ?(?:>=|==|<=|>|<|~=) ?[\d.]+",
            r"[Pp]lease (?:upgrade|update|downgrade) (?:your )?`?[\w.-]+`? (?:to|>=)",
            r"numpy\.core\.multiarray failed to import"),
        "install versions that fit into the profile's python env (`pip install 'PKG==X'`; `pip check` lists the "
        "conflicts), or rebuild the compiled package against the installed torch/numpy (an undefined symbol or a "
        "binary incompatibility means it was built for other versions)",
        layer="package",
        unless=re.compile(rb"circular import"),
        examples=("pkg_resources.ContextualVersionConflict: (Twisted 17.1.0, Requirement.parse('twisted!=17.1.0'))",
                  "ImportError: tokenizers>=0.11.1,!=0.11.3,<0.14 is required for a normal functioning of this "
                  "module, but found tokenizers==0.14.0.",
                  "ImportError: /x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
                  "ImportError: cannot import name 'LlamaConfig' from 'transformers'"),
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
        layer="launch",
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
            r"bad interpreter: No such file or directory",
            r"/usr/bin/env: ['‘`]?[\w.-]+['’`]?: No such file or directory",
            r"can't open file [^\n]*\[Errno 2\] No such file or directory",
            r"Lmod has detected the following error", r"The following module\(s\) are unknown",
            r"[Uu]nable to locate a modulefile",
            r"[Ee]xit(?:ed with exit)? code:? 127\b",
            r"exitcode\s*:\s*127\b",
            r"exited with code 127\b",  # the job script's "launch exited with code 127": the shell's not-found code
        ),
        "the job could not find a program (the launcher, python, a module command) or its environment on the "
        "compute node: check the profile's python env / modules (the activate path, `module load`), and that "
        "they exist on the nodes (`srun -N1 bash -lc 'which python torchrun'`)",
        layer="launch",
        examples=("python: can't open file '/x/train.py': [Errno 2] No such file or directory",
                  "Lmod has detected the following error: The following module(s) are unknown: \"cuda/13\""),
    ),
    Rule(
        "tokenizer_error",
        "the tokenizer could not be loaded or used",
        _re(r"does not have a padding token", r"Asking to pad but the tokenizer",
            r"Can't load tokenizer", r"[Tt]okenizer class \w+ does not exist or is not currently imported",
            r"(?:[Cc]ouldn't|[Cc]annot|[Uu]nable to) (?:instantiate|load|find)[^\n]{0,40}[Tt]okenizer",
            r"[Tt]okenizer[^\n]{0,80}(?:failed to load|could not be loaded|is not (?:set|defined|found))",
            r"untagged enum \w+", r"sentencepiece_processor\.cc|SentencePiece[^\n]{0,40}(?:[Ee]rror|failed)",
            r"srcIndex < srcSelectDimSize", r"chat_template is not set",
            r"pad_token[^\n]{0,40}(?:not set|is None|missing)"),
        "the tokenizer's files or settings do not fit: a tokenizer without a padding token needs one (pad_token = "
        "eos_token in the script); 'Can't load tokenizer' means its files are not where the job looks (stage them: "
        "`hpclaunch stage-assets RECIPE --profile P`); 'does not exist or is not currently imported' and "
        "'untagged enum' mean transformers/tokenizers are older than the tokenizer: upgrade them in the python env; "
        "'srcIndex < srcSelectDimSize' means token ids beyond the model's embeddings (the tokenizer is not the "
        "model's: resize the embeddings after adding tokens)",
        layer="data",
        examples=("ValueError: Asking to pad but the tokenizer does not have a padding token.",
                  "OSError: Can't load tokenizer for 'bert-base-uncased'.",
                  "Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 3"),
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
            r"Cannot find the requested files in the (?:local|disk) cache",
            r"couldn't find (?:them|it) in the cached files",
            r"is not a local folder and is not a valid model identifier",
            r"Couldn't reach [^\n]* on the Hub", r"[Cc]ouldn't connect to ['\"]?https?://",
            r"Connection error, and we cannot find the requested files",
            r"Repository Not Found|RepositoryNotFoundError|GatedRepoError",
            r"Can't load (?:the )?(?:config|configuration|model|weights|processor|feature extractor"
            r"|image processor)\b",
            r"does not appear to have a file named", r"Incorrect path_or_model_id",
            r"DatasetNotFoundError", r"doesn't exist on the Hub", r"Couldn't find [^\n]*on the Hugging Face Hub",
            r"host='(?:huggingface\.co|hf-mirror\.com|cdn-lfs[\w.-]*)'",
            r"Max retries exceeded with url: /(?:api/)?(?:models|datasets|[\w.-]+/[\w.-]+/resolve)",
            r"(?:huggingface\.co|hf-mirror\.com)[^\n]*(?:[Tt]imed? ?out|[Cc]onnection|SSL|refused|resolve)",
        ),
        _OFFLINE,
        layer="data",
        examples=("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max "
                  "retries exceeded with url: /bert-base-uncased/resolve/main/config.json",
                  "OSError: bert-base-uncased does not appear to have a file named config.json."),
    ),
    Rule(  # the same class: a compute node tried the internet (name lookup, no route), not for a rendezvous
        "asset_missing",
        "a model, tokenizer or dataset is not in the offline store",
        _re(r"[Nn]ame or service not known", r"[Tt]emporary failure in name resolution", r"NameResolutionError",
            r"Failed to resolve ['\"]?[\w.-]+\.[a-z]{2,}", r"[Nn]etwork is unreachable",
            r"Failed to establish a new connection", r"urlopen error"),
        _OFFLINE,
        layer="data",
        unless=re.compile(_NOT_HUB.encode()),
        examples=("socket.gaierror: [Errno -3] Temporary failure in name resolution",
                  "OSError: [Errno 101] Network is unreachable"),
    ),
    Rule(
        "module_missing",
        "a Python module is missing",
        _re(r"ModuleNotFoundError", r"ImportError\b", r"No module named",
            r"requires the following packages that were not found", r"DistributionNotFound",
            r"PackageNotFoundError"),
        "install the package into the job's Python environment (the profile's python env / modules), "
        "or check that the job activates the environment you expect",
        layer="package", unless=re.compile(rb"circular import"),
    ),
    Rule(
        "data_corrupt",
        "a data or checkpoint file is damaged",
        _re(r"ArrowInvalid", r"magic bytes not found", r"[Cc]orrupt(?:ed)? (?:record|file|data|zip|archive|image"
            r"|shard|checkpoint)",
            r"(?:file|data|archive|record|dataset|image|checkpoint|shard)[^\n]{0,40}(?:is |was |appears to be |may be |"
            r"might be )"
            r"(?:corrupt(?:ed)?|truncated|damaged)",
            r"image file is truncated", r"cannot identify image file", r"UnpicklingError", r"invalid load key",
            r"pickle data was truncated", r"Ran out of input", r"failed finding central directory",
            r"PytorchStreamReader failed", r"File is not a zip file|BadZipFile", r"HeaderTooLarge",
            r"[Ee]rror while deserializing header", r"JSONDecodeError", r"JSON parse error", r"DataLossError",
            r"CRC(?:32)? (?:check )?(?:failed|mismatch|error)", r"[Cc]hecksum (?:mismatch|does not match|failed)",
            r"NonMatchingChecksumError", r"[Uu]nexpected end of (?:file|data|stream)", r"file signature not found",
            r"truncated file", r"mmap length is greater than file size", r"Error -3 while decompressing",
            r"not a (?:gzip|parquet|valid [\w-]+) file", r"unexpected EOF, expected \d+ more bytes"),
        "the file is damaged or not what its name says (cut short by a full disk or an interrupted copy, a Git LFS "
        "pointer instead of the data, another format): check its size and checksum against the source "
        "(`hpclaunch assets verify` for staged assets), copy or stage it again; a damaged checkpoint: go on from "
        "the one before it",
        layer="data",
        unless=re.compile(rb"malloc|free\(\)|double free|corrupted size|linked list|top size"),
        examples=("pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer.",
                  "_pickle.UnpicklingError: invalid load key, '\\x00'.",
                  "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"),
    ),
    Rule(
        "data_missing",
        "a data file the job reads does not exist",
        _re(r"FileNotFoundError", r"No such file or directory: ['\"]", r"\[Errno 2\]", r"Unable to find ['\"]",
            r"Couldn't find (?:a dataset script|any data files?)",
            r"(?:[Dd]ata(?:set)?|[Ff]ile|[Pp]ath|[Dd]irectory|[Ff]older|[Ss]plit)s?\b[^\n]{0,80}(?:does not exist"
            r"|doesn't exist|is missing)",
            r"num_samples should be a positive integer value, but got num_samples=0",
            r"[Nn]o (?:\(supported\) )?(?:data )?files? (?:were )?(?:found|matched)", r"DataFilesNotFoundError"),
        "the path does not exist where the job runs: check the recipe's dataset (dataset.source, --set "
        "dataset.source=...), that it is on a filesystem the compute nodes mount (not a login node's /tmp), and "
        "that relative paths hold (the job runs in its run directory: use absolute paths)",
        layer="data",
        unless=re.compile(rb"find address for|shared object|\.so[.:\s]"),
        examples=("FileNotFoundError: Unable to find '/data/code_alpaca_20k.jsonl'",
                  "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.json'"),
    ),
    Rule(
        "loss_scale_min",
        "fp16 loss scaling gave up (the loss scale reached its minimum)",
        _re(r"loss scale[^\n]{0,40}(?:minimum|min_scale|cannot decrease|reach(?:ed)? (?:the |its )?min)",
            r"[Mm]inimum loss scale reached", r"(?:min_loss_scale|minimum loss scale)[^\n]{0,40}(?:reached|hit)",
            r"[Ll]oss scale (?:is )?(?:too small|below)"),
        "fp16 gradients overflowed at every step until the loss scaler gave up: train in bf16 where the devices "
        "have it (--set train.precision=bf16), lower the learning rate (--set train.lr=...) or lengthen warm-up "
        "(train.warmup_steps), clip gradients (train.grad_clip), and look for outliers in the data; go on from a "
        "checkpoint before it",
        layer="training",
        examples=("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
                  "FloatingPointError: Minimum loss scale reached (0.0001)."),
    ),
    Rule(
        "nan_loss",
        "the loss became NaN/Inf (training diverged)",
        _re(r"(?i:\b(?:loss|outputs?|logits|gradients?|grad[_ ]norm|network outputs)\b[^\n]{0,40}\b(?:is|are|was"
            r"|became|becomes|contains?|got)\s+(?:a\s+)?(?:nan|inf|-inf|non-finite)\b)",
            r"(?i:\bnan\b (?:loss|detected|encountered|values?|in (?:loss|grad|output|the)|or inf))",
            r"(?i:non-finite (?:loss|values?|gradients?|norm))", r"is non-finite", r"returned nan values",
            r"NaN or Inf found", r"found NaN in", r"(?i:loss (?:is )?nan\b)", r"(?i:\binf(?:inite)? or nan\b)",
            r"(?i:detected (?:a )?nan)"),
        _NAN,
        layer="training",
        examples=("ValueError:Network outputs is NAN! Stop Training", "Loss is nan, stopping training",
                  "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite"),
    ),
    Rule(  # the same class from a metrics line alone: what it says is true, but a failure after it may be another
        "nan_loss",
        "the loss became NaN/Inf (training diverged)",
        _re(r"(?i:\b(?:loss|grad_?norm)\b\s*[:=]?\s*(?:nan|-?inf)\b)"),
        _NAN,
        layer="training", generic=True,
        examples=("step 120 | loss nan | lr 3e-4",),
    ),
    Rule(
        "segfault",
        "a process crashed",
        _re(r"Segmentation fault", r"\bSIGSEGV\b", r"core dumped", r"Fatal Python error", r"\bSIGABRT\b",
            r"Caught signal (?:11|6|4|8)\b", r"\*\*\* Process received signal \*\*\*", r"[Ii]llegal instruction",
            r"\bSIGILL\b", r"[Ff]loating point exception", r"\bSIGFPE\b", r"double free or corruption",
            r"free\(\): invalid", r"malloc\(\): ", r"corrupted (?:size|double-linked|top size)",
            r"stack smashing detected", r"exitcode\s*:\s*-(?:11|4|8)\b", r"return code = -(?:11|6)\b"),
        "a native crash: check driver/library versions on the node (a library built for another torch/CUDA, an "
        "'Illegal instruction' for another CPU); rerun with CUDA_LAUNCH_BLOCKING=1 and PYTHONFAULTHANDLER=1 for "
        "a stack",
        layer="library", generic=True,
        examples=("[ip-172-31-77-112:61444] Signal: Segmentation fault (11)", "Illegal instruction (core dumped)"),
    ),
    Rule(
        "network_fault",
        "a network (InfiniBand/RoCE) error",
        _re(
            r"NET/IBP? ?:\s*Got completion",
            r"NCCL WARN NET/IB[^\n]*(?:[Ee]rror|failed)",
            r"NET/(?:OFI|IBext)[^\n]*(?:[Ee]rror|failed)",
            r"transport retry counter exceeded", r"[Tt]ransport retry count exceeded",
            r"\bibv_\w+ (?:failed|error|returned)", r"IBV_WC_\w+_ERR",
            r"UCX[^\n]{0,40}(?:ERROR|error)[^\n]*(?:[Tt]ransport|timeout|[Ee]ndpoint|unreachable|retry)",
            r"mlx5[^\n]*(?:CQE|syndrome|[Ee]rror)",
        ),
        "a NIC or link failed on NODE or between it and its peer: go on without it (`hpclaunch resume JOB "
        "--exclude NODE`) and tell the administrators (`ibstat`, the port's link state on the node)",
        node_fault=True, layer="network",
        examples=("UCX  ERROR ib_mlx5: [UCT] transport retry count exceeded on mlx5_0:1/IB",),
    ),
    Rule(
        "network_interface",
        "no usable network interface",
        _re(
            r"no socket interface found",
            r"neither AF_INET",
            r"(?:NCCL|GLOO|HCCL|TP)_SOCKET_IFNAME[^\n]*(?:not found|invalid|no interface|does not exist)",
            r"Unable to find address for",
            r"ifa != nullptr",
        ),
        "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME names an interface the node does not have: list them with "
        "`ip -br addr` on a compute node and set the profile's interface (a name, a prefix such as `ib`, or "
        "a comma list)",
        layer="network",
        examples=("RuntimeError: [enforce fail at device.cc:83] ifa != nullptr. Unable to find address for: eth0",),
    ),
    Rule(
        "rendezvous_failed",
        "could not reach the rendezvous on the head node",
        _re(
            r"client socket has timed out after \d+m?s while trying to connect to",
            r"TCP client failed to connect",
            r"DistNetworkError",
            r"retriev\w* ncclUniqueId from \[\d+\] via c10d key-value store",
            r"Rendezvous\w*(?:Timeout|Connection|Closed|State)Error",
            r"DistStoreError",
            r"store based barrier",
            r"(?:server|client) socket has failed to connect",
            r"[Cc]onnection refused[^\n]{0,80}(?:\b29\d\d\d\b|MASTER|c10d|store|rendezvous)",
            r"(?:c10d|TCPStore|rendezvous|[Ss]tore)[^\n]{0,120}[Cc]onnection refused",
            r"network addresses of [^\n]* cannot be retrieved",
            r"environment variable (?:MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE) expected, but not set",
            r"[Rr]endezvous (?:timed out|failed|closed|is closed)",
            r"Topology build timed out", r"meta server",
        ),
        "ranks could not connect to the head node's store (MASTER_ADDR:MASTER_PORT): check that the head node "
        "started (its rank 0 log), that the address resolves to an interface the other nodes reach (the "
        "profile's GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME), and that no firewall blocks the port",
        layer="network",
        examples=('    "message": "RendezvousTimeoutError: ",',
                  "RuntimeError: Timed out initializing process group in store based barrier on rank: 3"),
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
        primary=False, layer="network",
    ),
    Rule(
        "collective_error",
        "the collective library (NCCL/HCCL) failed",
        _re(
            r"NCCL error[^\n]*(?:unhandled system error|internal error|unhandled cuda error|invalid usage)",
            r"NCCL Error \d+: ",
            r"nccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error",
            r"HCCL error in:",
            r"\bEJ000\d\b",
            r"NCCL WARN[^\n]*(?:[Ff]ailed|[Ee]rror|[Aa]bort)",
        ),
        "NCCL/HCCL failed on this rank: the lines after it (`Last error:`) say why; a socket or connection "
        "error points at the network (the profile's NCCL_SOCKET_IFNAME / HCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO), "
        "HCCL EJ0001 at a process of an earlier job still holding the NPU (check `npu-smi info` on the node), "
        "an internal error at a NCCL/driver mismatch (NCCL_DEBUG=WARN names it)",
        layer="network", generic=True,
        # a peer that went away (NCCL's result 6 is ncclRemoteError) is the cascade, and NCCL's notes are no failure
        unless=re.compile(rb"NET/Plugin|No plugin found|iommu|NUMA|Could not find real path|cudaDriverVersion"
                          rb"|Broken pipe|Connection reset|closed by (?:remote )?peer|retcode 6\b"),
        examples=("ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
                  "10.0.0.2<45763> failed : Software caused connection abort",),
    ),
    Rule(
        "msrun_worker_failed",
        "an msrun worker exited with an error",
        _re(r"Worker process \d+ exit with exception"),
        "msrun saw a worker fail: its own log says why (`hpclaunch logs JOB --tail 50`, the files "
        "logs/msrun/node<K>.restart-<N>/worker_<R>.log)",
        primary=False, layer="launch",
    ),
    Rule(
        "peer_failed",
        "lost a peer",
        _re(
            r"Connection closed by (?:remote )?peer",
            r"Failed to execute operation \w+ from rank \d+, retcode 6\b",
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
        primary=False, layer="network",
    ),
    Rule(
        "bad_arguments",
        "the script refused its command-line arguments",
        _re(r"^\s*" + RANK_PREFIX.decode() + r"[\w.-]+: error: (?:unrecognized arguments|the following arguments "
            r"are required|argument [^\n]*?: (?:invalid|expected|ambiguous|not allowed))"),
        "its own argument parser said so before it started: the arguments come from the recipe's `args` (or `-- ARGS` "
        "after `submit SCRIPT.py`); a recipe key such as the learning rate goes in --set train.lr=3e-4, not in a flag "
        "(`hpclaunch recipes show RECIPE` lists the keys)",
        layer="launch",
    ),
    Rule(  # hpclaunch's msrun worker wrapper (runtime/node/msrun_worker.py): the only word of a silent worker
        "exited",
        "a rank exited with an error code and no error message",
        _re(r"WorkerExitError: msrun worker rank \S+ exited with code -?\d+"),
        "look at the last lines of its log (`hpclaunch logs JOB --rank R --tail 50`); a signal or os._exit ends a "
        "rank silently",
        layer="code", generic=True,
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
        layer="code", generic=True,
    ),
    Rule(  # the same class: an exception whose name does not end in Error or Exception (a module's own, SystemExit)
        "python_error",
        "the training script raised an exception",
        _re(r"^\s*" + RANK_PREFIX.decode() + r"(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*[a-z])[A-Z]\w*: \S",
            r"^\s*" + RANK_PREFIX.decode()
            + r"[A-Z]\w*(?:Exit|Failure|Fault|Timeout|Iteration|Unsupported)(?::[^\n]*)?$"),
        "read the traceback above this line in the rank's log (`hpclaunch logs JOB --rank R --tail 50`)",
        layer="code", generic=True,
        examples=("torch._dynamo.exc.Unsupported: call_function UserDefinedClassVariable", "SystemExit: 2"),
    ),
)

BY_NAME: dict[str, Rule] = {}
for _rule in RULES:
    BY_NAME.setdefault(_rule.name, _rule)

ALL_KEYS = SCAN_KEYS
_CLASSIFY = tuple((r, re.compile(r.pattern.pattern, re.MULTILINE)) for r in RULES)


def classify(line: bytes) -> Rule | None:
    for rule, pattern in _CLASSIFY:
        if pattern.search(line) and not (rule.unless and rule.unless.search(line)):
            return rule
    return None


def layer_rank(name: str) -> int:
    """Where a class sits in the taxonomy (lower: nearer the hardware); unknown names last."""
    rule = BY_NAME.get(name)
    return LAYERS.index(rule.layer) if rule else len(LAYERS)
