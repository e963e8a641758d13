"""DeepSpeed checkpoints written in the background: DeepSpeed's own save_checkpoint runs (its layout, its files
per rank: the model states from data-parallel rank 0, every rank's ZeRO partition of the optimizer), but through a
checkpoint engine of DeepSpeed's plug-in interface that copies each file's state to CPU memory instead of writing
it. checkpoint.py writes the copies from a thread, fsyncs them and publishes the folder once every rank's part is
there, as for the torch engines. Imported by engine.DeepSpeedEngine only (it imports deepspeed).

DeepSpeed's own asynchronous engines are not used: its FastCheckpointEngine (`checkpoint.writer`) writes before
save_checkpoint returns, through the `async_io` op (a JIT build against libaio's headers) or plain Python; its
Decoupled engine writes from a spawned process but commits at the next optimizer step, waiting there for the whole
write, and its process keeps the rank from exiting; both read CROSS_RANK/CROSS_SIZE, which only DeepSpeed's launcher
sets (a recipe's `checkpoint.writer` is refused at submit: config/rules.py). DataStates and Nebula are external
packages. A ds_config that DeepSpeed must write itself keeps DeepSpeed's engine, and the save blocks (`blocking`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

# CheckpointEngine's interface since DeepSpeed 0.15: create, save, load, commit (the argument of create and commit is a
# tag in older releases, a CheckpointCommitInfo in newer ones: taken as it comes)
from deepspeed.runtime.checkpoint_engine.checkpoint_engine import CheckpointEngine

from hpclaunch.runtime.train.cpucopy import to_cpu


def blocking(config: dict[str, Any], engine_name: str) -> str | None:
    """Why this DeepSpeed config's checkpoints must be written synchronously by DeepSpeed itself, or None."""
    zero = config.get("zero_optimization") or {}
    for part in ("offload_optimizer", "offload_param"):
        if str((zero.get(part) or {}).get("device", "")).lower() == "nvme":
            return (f"zero_optimization.{part} is on NVMe: DeepSpeed copies its swap files into the checkpoint "
                    "itself")
    if engine_name != "TorchCheckpointEngine":
        return f"the DeepSpeed config chooses its own checkpoint engine ({engine_name})"
    return None


def host_room(environ: Mapping[str, str] | None = None, meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Bytes of host memory one rank's copies may take: the memory available now (Linux's MemAvailable) shared by
    the node's ranks (torchrun's LOCAL_WORLD_SIZE); None where the system does not say."""
    try:
        line = next(ln for ln in meminfo.read_text().splitlines() if ln.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return None
    ranks = int((os.environ if environ is None else environ).get("LOCAL_WORLD_SIZE", "1") or 1)
    return int(line.split()[1]) * 1024 // max(ranks, 1)


def tensor_bytes(obj: Any) -> int:
    """The bytes of the tensors in a state (nested dicts, lists, tuples): what a copy of it takes."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, Mapping):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


class CopyingEngine(CheckpointEngine):
    """Takes the place of DeepSpeed's checkpoint engine for one save_checkpoint: each `save(state, path)` keeps a
    CPU copy under the path relative to the checkpoint folder; folders are made for real (DeepSpeed writes its
    small `latest` file and recovery script there itself). A file whose copy would not fit in `room` bytes of host
    memory is written by DeepSpeed's engine at once instead (synchronously; named in `written`)."""

    def __init__(self, live: CheckpointEngine, root: Path, room: int | None = None) -> None:
        super().__init__()
        self.name = "hpclaunch-copy"
        self.live, self.root, self.room = live, Path(root), room
        self.files: dict[str, Any] = {}
        self.written: list[str] = []
        self._memo: dict[tuple[Any, ...], Any] = {}  # a tensor in two files is copied once
        self._copied = 0

    def create(self, info: Any) -> None:
        pass

    def save(self, state_dict: Any, path: str) -> None:
        name = str(Path(path).relative_to(self.root))
        size = tensor_bytes(state_dict)
        if self.room is not None and self._copied + size > self.room:
            self.live.save(state_dict, path)
            self.written.append(f"{name} ({size / 1e9:.3g} GB, {self.room / 1e9:.3g} GB of host memory free)")
            return
        self._copied += size
        self.files[name] = to_cpu(state_dict, self._memo)

    def load(self, path: str, map_location: Any = None) -> Any:
        return self.live.load(path, map_location)

    def commit(self, info: Any) -> bool:
        return True  # checkpoint.py publishes the folder once every rank's files are durable

    def is_data_parallel_writer(self, dp_rank: int) -> bool:
        """As the live engine says (DeepSpeed asks it since 0.16; older releases write from data-parallel rank 0)."""
        asks = getattr(self.live, "is_data_parallel_writer", None)
        return bool(asks(dp_rank)) if asks is not None else dp_rank == 0

    def is_decoupled(self) -> bool:
        return False  # not DeepSpeed's decoupled engine: nothing to commit after save_checkpoint

    def preserves_storage_sharing(self) -> bool:
        return False  # DeepSpeed need not clone first: the copy is taken here
