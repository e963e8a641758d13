"""Device and process group from the profile: HPCLAUNCH_ACCELERATOR (cuda|musa|npu|cpu) and
HPCLAUNCH_BACKEND (nccl|mccl|hccl|gloo), as the job script exports them.

The vendor plug-ins (torch_musa, torch_npu) are imported only when their accelerator is chosen.
A script started without torchrun (no WORLD_SIZE) runs as a world of one.
"""

from __future__ import annotations

import datetime
import os
import resource
import socket
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from hpclaunch.state import timeline

#: accelerator -> (vendor plug-in to import, default collective backend)
ACCELERATORS = {
    "cuda": (None, "nccl"),
    "musa": ("torch_musa", "mccl"),
    "npu": ("torch_npu", "hccl"),
    "cpu": (None, "gloo"),
}


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    accelerator: str
    backend: str
    device: torch.device
    tensor_parallel: int = 1  # ranks per model replica (hpclaunch/runtime/train/tensor_parallel.py)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def dp_size(self) -> int:
        """Model replicas: the data-parallel degree (the world size without tensor parallelism)."""
        return self.world_size // self.tensor_parallel

    @property
    def dp_rank(self) -> int:
        """This rank's replica: which micro-batches it reads (tensor-parallel ranks of a replica read the same)."""
        return self.rank // self.tensor_parallel

    @property
    def module(self) -> Any:
        """torch.cuda / torch.musa / torch.npu / torch.cpu."""
        return getattr(torch, self.accelerator)

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def synchronize(self) -> None:
        if self.accelerator != "cpu":
            self.module.synchronize()

    def peak_memory_bytes(self) -> int:
        """Peak device memory; on CPU the process's peak resident set size."""
        if self.accelerator == "cpu":
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return int(self.module.max_memory_allocated(self.device))

    def device_name(self) -> str:
        """The device's name as its runtime reports it ("NVIDIA H100 80GB HBM3"); "cpu" on the CPU."""
        if self.accelerator == "cpu":
            return "cpu"
        return str(self.module.get_device_name(self.device))



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _disable_deepspeed_shm_op() -> None:
    """DeepSpeed JIT-builds a shared-memory all-reduce op on CPU at its first init_distributed (~90 s on
    2 cores). There is no environment variable to skip it; marking the op incompatible makes DeepSpeed
    fall back to plain torch.distributed (gloo), which is what a CPU job uses anyway."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def init_distributed(*, deepspeed: bool = False, seed: int | None = None, threads: int | None = None,
                     deterministic: bool = False, tensor_parallel: int = 1) -> Dist:
    """threads: torch threads per rank on CPU (train.threads_per_rank; default: OMP_NUM_THREADS).
    tensor_parallel: ranks per model replica (parallel.model_parallel), dividing the world size.
    deterministic (train.deterministic, the `parity` presets): deterministic kernels where the backend has
    them (a warning where it has none), no TF32, no cuDNN autotuning, so that runs on two clusters compare."""
    timeline.mark("imports_done")  # rank 0: the script's module imports are done (torch, the runtime)
    if deterministic:  # read by cuBLAS when it initialises: before the device is touched
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    accelerator = os.environ.get("HPCLAUNCH_ACCELERATOR") or ("cuda" if torch.cuda.is_available() else "cpu")
    if accelerator not in ACCELERATORS:
        raise SystemExit(f"HPCLAUNCH_ACCELERATOR={accelerator!r}: use one of {', '.join(ACCELERATORS)}")
    plugin, default_backend = ACCELERATORS[accelerator]
    backend = os.environ.get("HPCLAUNCH_BACKEND") or default_backend
    # DeepSpeed calls these collectives by their old names: one warning per call floods the rank logs.
    warnings.filterwarnings(
        "ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning
    )
    if plugin:
        __import__(plugin)  # registers torch.musa / torch.npu and the mccl / hccl backends
    if "WORLD_SIZE" not in os.environ:  # run directly with python: a world of one
        os.environ.update(
            RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())
        )
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world % tensor_parallel:
        raise SystemExit(f"tensor parallel {tensor_parallel} does not divide the {world} ranks")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if accelerator == "cpu":
        device = torch.device("cpu")
        if threads:
            torch.set_num_threads(threads)
    else:
        device = torch.device(accelerator, local_rank)
        getattr(torch, accelerator).set_device(device)
        if accelerator == "cuda":  # TF32 tensor cores for the fp32 matmuls left outside autocast
            torch.backends.cuda.matmul.allow_tf32 = not deterministic
            torch.backends.cudnn.allow_tf32 = not deterministic
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    from hpclaunch.runtime.node import progress

    progress.enter("init")
    # the profile's collective_timeout: a collective that waits longer is aborted (and named in the log)
    timeout = datetime.timedelta(seconds=float(os.environ.get("HPCLAUNCH_COLLECTIVE_TIMEOUT", "600") or 600))
    if deepspeed:
        import deepspeed as ds

        if accelerator == "cpu":
            _disable_deepspeed_shm_op()
        ds.init_distributed(dist_backend=backend, timeout=timeout)
    elif world > 1 or not dist.is_initialized():
        kwargs: dict[str, Any] = {"device_id": device} if accelerator != "cpu" else {}
        dist.init_process_group(backend=backend, timeout=timeout, **kwargs)
    timeline.mark("rendezvous_done")  # rank 0: the process group is up
    if seed is not None:
        seed_everything(seed)
    return Dist(rank, world, local_rank, accelerator, backend, device, tensor_parallel)


def seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every device of cuda/musa/npu


def all_reduce_mean(value: torch.Tensor, d: Dist) -> torch.Tensor:
    if d.world_size > 1:
        value = value.clone()
        dist.all_reduce(value)
        value /= d.world_size
    return value


def all_reduce_max(value: torch.Tensor, d: Dist) -> torch.Tensor:
    if d.world_size > 1:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value
