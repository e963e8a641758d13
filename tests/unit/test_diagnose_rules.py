"""The rule table (hpclaunch.logs.rules) line by line: every row's own examples, and the words each failure family
is known to be said in (CUDA, ROCm, NCCL, HCCL, Slurm, PMIx, the kernel, Lustre, Apptainer/pyxis/Charliecloud,
Python, Hugging Face, DeepSpeed), each classified as its class and found by the scan's keys. These lines are
written from the libraries' own messages, not from the recorded corpus (tests/fixtures/failures, whose held-out
part measures the rules: benchmarks/diagnose_accuracy.py)."""

from __future__ import annotations

import pytest

from hpclaunch.logs.diagnose import _candidate_lines, scan_bytes
from hpclaunch.logs.rules import BY_NAME, GROUPS, LAYERS, RULES, classify

KNOWN: list[tuple[str, str]] = [
    # hardware
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "device_fault"),
    ("RuntimeError: CUDA error: unspecified launch failure", "device_fault"),
    ("NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, DBE (0x00000002)", "device_fault"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "device_fault"),
    ("Memory access fault by GPU node-4 (Agent handle: 0x55d) on address 0x7f1b. Reason: Unknown.", "device_fault"),
    ("srun: error: Node failure on nid001234", "node_fail"),
    # infrastructure: network
    ("node2:123:456 [0] NCCL INFO NET/IB : Got completion from peer 10.0.0.1<40000> with error 12", "network_fault"),
    ("node2:123:456 [0] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_create_qp failed", "network_fault"),
    ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
     "Unable to find address for: ib0", "network_interface"),
    ("node1:11:22 [0] NCCL WARN Bootstrap : no socket interface found", "network_interface"),
    ("[W socket.cpp:601] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 111 - Connection "
     "refused).", "rendezvous_failed"),
    ("ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR "
     "expected, but not set", "rendezvous_failed"),
    ("RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: "
     "store_based_barrier_key:1 (world_size=4, worker_count=2, timeout=0:30:00)", "rendezvous_failed"),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
     "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1", "collective_error"),
    ("RuntimeError: NCCL Error 2: unhandled system error", "collective_error"),
    # infrastructure: filesystem
    ("LustreError: 167-0: scratch-OST0001-osc-ffff: This client was evicted by scratch-OST0001; in progress "
     "operations using this service will fail.", "lustre_error"),
    ("Lustre: scratch-MDT0000-mdc-ffff: Connection to scratch-MDT0000 (at 10.0.0.1@o2ib) was lost; in progress "
     "operations using this service will wait for recovery to complete", "lustre_error"),
    ("OSError: [Errno 116] Stale file handle", "stale_file_handle"),
    ("mkdir: cannot create directory '/opt/venv/cache': Read-only file system", "read_only_fs"),
    ("PermissionError: [Errno 13] Permission denied: '/projects/shared/checkpoints'", "permission_denied"),
    # infrastructure: scheduler, MPI
    ("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***", "slurm_timeout"),
    ("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2025-01-01T00:00:00 DUE TO PREEMPTION ***", "preempted"),
    ("srun: error: Unable to allocate resources: Requested node configuration is not available",
     "node_config_unavailable"),
    ("sbatch: error: Memory specification can not be satisfied", "node_config_unavailable"),
    ("sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
     "node_config_unavailable"),
    ("srun: error: Unable to create step for job 123: More processors requested than permitted",
     "step_creation_failed"),
    ("srun: Job 123 step creation temporarily disabled, retrying (Requested nodes are busy)", "step_creation_failed"),
    ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's "
     "size and/or time limits)", "slurm_refused"),
    ("[node1:12345] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line 2198", "pmix_error"),
    ("*** An error occurred in MPI_Init_thread", "pmix_error"),
    ("The application appears to have been direct launched using \"srun\", but OMPI was not built with SLURM's PMI "
     "support and therefore cannot execute.", "pmix_error"),
    # resources: memory
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=123.0. Some of your processes may have been "
     "killed by the cgroup out-of-memory handler.", "host_oom"),
    ("srun: error: node107: task 0: Out Of Memory", "host_oom"),
    ("MemoryError: Unable to allocate 12.0 GiB for an array with shape (3, 1073741824) and data type float32",
     "host_oom"),
    ("OSError: [Errno 12] Cannot allocate memory", "host_oom"),
    ("terminate called after throwing an instance of 'std::bad_alloc'", "host_oom"),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape"
     "[32,1024,1024]", "device_oom"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2GiB",
     "device_oom"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "device_oom"),
    ("RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.", "shm_exhausted"),
    ("Bus error (core dumped)", "shm_exhausted"),
    ("node1:1:2 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x "
     "(size 9637888)", "shm_exhausted"),
    # resources: disk
    ("RuntimeError: [enforce fail at inline_container.cc:764] . PytorchStreamWriter failed writing file "
     "data/12: file write failed", "no_space"),
    ("safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
     "message: \"No space left on device\" })", "no_space"),
    ("cp: error writing '/scratch/u/model.bin': No space left on device", "no_space"),
    ("cp: error writing '/home/u/model.bin': Disk quota exceeded", "disk_quota"),
    # software: drivers
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU "
     "driver.", "driver_too_old"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 803: system has unsupported display driver "
     "/ cuda driver combination", "driver_too_old"),
    ("Error 804: forward compatibility was attempted on non supported HW", "driver_too_old"),
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", "driver_too_old"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "cuda_arch_mismatch"),
    ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
     "V100-SXM2-32GB GPU has compute capability 7.0.", "cuda_arch_mismatch"),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_90'", "cuda_arch_mismatch"),
    ("Found GPU0 Tesla K80 which is of cuda capability 3.7. PyTorch no longer supports this GPU because it is too "
     "old.", "cuda_arch_mismatch"),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", "duplicate_gpu"),
    # software: libraries
    ("OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
     "shared_library_missing"),
    ("Could not load library libcudnn_cnn_infer.so.8. Error: libcudnn_cnn_infer.so.8: cannot open shared object "
     "file: No such file or directory", "shared_library_missing"),
    ("Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}",
     "shared_library_missing"),
    ("/lib64/libm.so.6: version `GLIBC_2.27' not found (required by /opt/x/bin/python3.10)", "glibc_version"),
    ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found", "glibc_version"),
    ("Fatal Python error: Segmentation fault", "segfault"),
    ("free(): invalid pointer", "segfault"),
    ("*** stack smashing detected ***: terminated", "segfault"),
    # software: packages, launch
    ("A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0 as it may crash.", "package_version"),
    ("ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 "
     "from PyObject", "package_version"),
    ("RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions.",
     "package_version"),
    ("transformers 4.40.0 requires tokenizers<0.20,>=0.19, but you have tokenizers 0.15.0 which is incompatible.",
     "package_version"),
    ("AttributeError: module 'numpy' has no attribute 'float'.", "package_version"),
    ("ModuleNotFoundError: No module named 'deepspeed'", "module_missing"),
    ("importlib.metadata.PackageNotFoundError: No package metadata was found for bitsandbytes", "module_missing"),
    ("ImportError: cannot import name 'helper' from partially initialized module 'utils' (most likely due to a "
     "circular import)", "python_error"),
    ("/var/spool/slurmd/job123/slurm_script: line 12: torchrun: command not found", "command_not_found"),
    ("/usr/bin/env: 'python': No such file or directory", "command_not_found"),
    ("ModuleCmd_Load.c(213):ERROR:105: Unable to locate a modulefile for 'cuda/11.8'", "command_not_found"),
    ("FATAL:   could not open image /scratch/x.sif: failed to retrieve path for /scratch/x.sif: lstat /scratch/x.sif: "
     "no such file or directory", "container_failed"),
    ("enroot-nsenter: failed to create user namespace: Operation not permitted", "container_failed"),
    ("ch-run[12345]: can't mkdir: /var/tmp/u.ch: Permission denied (ch_misc.c:409 13)", "container_failed"),
    ("main.py: error: the following arguments are required: --config", "bad_arguments"),
    # user code: data, assets, training
    ("OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached "
     "files and it looks like gpt2 is not the path to a directory containing a file named config.json.",
     "asset_missing"),
    ("ConnectionError: Couldn't reach 'wikitext' on the Hub (ConnectionError)", "asset_missing"),
    ("urllib3.exceptions.NameResolutionError: <urllib3.connection.HTTPSConnection object at 0x7f>: Failed to "
     "resolve 'huggingface.co' ([Errno -3] Temporary failure in name resolution)", "asset_missing"),
    ("huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/gpt2: offline "
     "mode is enabled.", "asset_missing"),
    ("datasets.exceptions.DatasetNotFoundError: Dataset 'wikitext' doesn't exist on the Hub or cannot be accessed.",
     "asset_missing"),
    ("OSError: image file is truncated (3 bytes not processed)", "data_corrupt"),
    ("EOFError: Ran out of input", "data_corrupt"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge", "data_corrupt"),
    ("zipfile.BadZipFile: File is not a zip file", "data_corrupt"),
    ("ValueError: mmap length is greater than file size", "data_corrupt"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/train.jsonl'", "data_missing"),
    ("ValueError: num_samples should be a positive integer value, but got num_samples=0", "data_missing"),
    ("datasets.exceptions.DataFilesNotFoundError: No (supported) data files found in /data/x", "data_missing"),
    ("OSError: Can't load tokenizer for 'gpt2'. If you were trying to load it from 'https://huggingface.co/models', "
     "make sure you don't have a local directory with the same name.", "tokenizer_error"),
    ("ValueError: Tokenizer class LlamaTokenizer does not exist or is not currently imported.", "tokenizer_error"),
    ("Loss is nan, stopping training", "nan_loss"),
    ("RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.", "nan_loss"),
    ("FloatingPointError: gradients are Nan/Inf", "nan_loss"),
    ("[2024-01-01 00:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
     "step. Attempted loss scale: 1, but hysteresis is 2. Current loss scale already at minimum - cannot decrease "
     "scale anymore.", "loss_scale_min"),
    ("KeyError: 'RANK'", "python_error"),
]


@pytest.mark.parametrize("rule", [r for r in RULES if r.examples], ids=lambda r: r.name)
def test_each_rows_examples_are_its_class_and_scanned(rule) -> None:  # noqa: ANN001 - a Rule
    for line in rule.examples:
        found = classify(line.encode())
        assert found is not None and found.name == rule.name, (line, found and found.name)
        assert _candidate_lines(line.encode() + b"\n") == [0], f"no scan key holds {line!r}"


@pytest.mark.parametrize("line,cause", KNOWN, ids=[f"{c}:{line[:40]}" for line, c in KNOWN])
def test_known_wordings(line: str, cause: str) -> None:
    """Found by the scan and classified, the way a rank log is read (a traceback's exception line included)."""
    data = f"step 3 loss 2.5\nTraceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n{line}\n"
    hits = scan_bytes(data.encode(), 0, "rank-0.restart-0.log")
    assert [h.rule for h in hits] == [cause], (line, hits)


def test_every_class_has_a_layer_and_a_hint() -> None:
    for rule in RULES:
        assert rule.layer in LAYERS and GROUPS[rule.layer], rule.name
        assert rule.hint and rule.title, rule.name
    assert list(GROUPS.values()).count("hardware") == 1
    # the taxonomy's order: hardware, infrastructure, resources, software, user code
    order = [GROUPS[layer] for layer in LAYERS]
    assert sorted(set(order), key=order.index) == ["hardware", "infrastructure", "resources", "software",
                                                   "user code"]


def test_rows_of_one_class_agree() -> None:
    for rule in RULES:
        first = BY_NAME[rule.name]
        assert (first.title, first.layer, first.primary) == (rule.title, rule.layer, rule.primary), rule.name


def test_a_traceback_of_an_unknown_exception_is_quoted_not_lost() -> None:
    data = (b"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    raise Boom(x)\n"
            b"mypackage.errors.TrainingAborted: the schedule ran out\n")
    (hit,) = scan_bytes(data, 0, "rank-0.restart-0.log")
    assert (hit.rule, hit.line) == ("python_error", "mypackage.errors.TrainingAborted: the schedule ran out")


def test_the_source_lines_of_a_traceback_are_not_errors() -> None:
    data = (b"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
            b"    raise RuntimeError('CUDA out of memory in my own words')\n"
            b"ValueError: bad shape\n")
    assert [h.rule for h in scan_bytes(data, 0, "x")] == ["python_error"]


def test_an_indented_error_outside_a_traceback_is_read() -> None:
    data = b'ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{\n  "message": {\n' \
           b'    "message": "RendezvousTimeoutError: ",\n'
    assert [h.rule for h in scan_bytes(data, 0, "x")] == ["rendezvous_failed"]


def test_warning_lines_are_weaker_than_the_failure() -> None:
    data = (b"WARNING: Skipping mount /etc/hosts [binds]: the file /etc/hosts doesn't exist in container\n"
            b"FATAL:   container creation failed: mount /x->/x error: while mounting /x: destination /x doesn't exist "
            b"in container\n")
    hits = scan_bytes(data, 0, "x")
    assert [(h.rule, h.warning) for h in hits] == [("data_missing", True), ("container_failed", False)]
