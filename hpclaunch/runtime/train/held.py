"""Bytes of the model states a rank really holds, to check the memory plan against (hpclaunch/plan/memory.py,
tests/integration/test_plan_vs_engine.py): its parameters (ZeRO-3: its shards), its gradients (ZeRO-2/3: its
partition) at the end of an accumulation, and its optimizer states (fp32 master copies and AdamW moments).

Each tensor is counted once per storage (a flat buffer and the views into it are one): the bytes are those of
the distinct storages. Written once per run, after the first optimizer step, as the metrics record
``{"kind": "states", "param_bytes", "grad_bytes", "optimizer_bytes", "offloaded_bytes"}``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

import torch


def _tensors(value: Any, depth: int = 2) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth - 1)
    elif depth and isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v, depth - 1)


def _dtensors_exist() -> bool:
    """Whether any DTensor can exist in this process: not before torch.distributed.tensor was imported (a second
    of CPU with sympy, which a rank without tensor parallelism need not pay to find out)."""
    return "torch.distributed.tensor" in sys.modules


def local(t: torch.Tensor) -> torch.Tensor:
    """The part of a tensor this rank stores: a DTensor's local shard (tensor parallel), any other tensor itself."""
    if not _dtensors_exist():
        return t
    from torch.distributed.tensor import DTensor

    return t._local_tensor if isinstance(t, DTensor) else t


def is_sharded(t: torch.Tensor) -> bool:
    """A DTensor split (not replicated) over some dimension of its mesh that has more than one rank."""
    if not _dtensors_exist():
        return False
    from torch.distributed.tensor import DTensor, Replicate

    if not isinstance(t, DTensor):
        return False
    sizes = t.device_mesh.shape
    return any(not isinstance(pl, Replicate) and n > 1 for pl, n in zip(t.placements, sizes, strict=True))


def storage_bytes(tensors: Iterable[torch.Tensor], seen: set[int] | None = None) -> int:
    """Bytes of the distinct storages of `tensors` not in `seen` (updated); meta and empty tensors count 0;
    of a DTensor, its local shard's."""
    seen = set() if seen is None else seen
    total = 0
    for t in map(local, tensors):
        if t.device.type == "meta" or t.numel() == 0:
            continue
        storage = t.untyped_storage()
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    return total


def param_tensors(module: torch.nn.Module) -> Iterator[torch.Tensor]:
    """The parameters a rank holds: under ZeRO-3 its shard (`ds_tensor`), elsewhere the whole tensor."""
    for p in module.parameters():
        shard = getattr(p, "ds_tensor", None)
        yield shard if shard is not None else p


def grad_tensors(module: torch.nn.Module, zero: Any = None) -> Iterator[torch.Tensor]:
    """Gradients: each parameter's `.grad`, and the gradient partitions of a ZeRO optimizer (its attributes
    named *grad*, but for the fixed-size staging buffers of offload, temp_grad_buffer_*: buffers, not states)."""
    yield from (p.grad for p in module.parameters() if p.grad is not None)
    if zero is not None:
        for name, value in vars(zero).items():
            if "grad" in name.lower() and not name.startswith("temp_"):
                yield from _tensors(value)


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    """A torch optimizer's parameters (under ZeRO: the fp32 master partitions) and states (AdamW moments)."""
    for group in optimizer.param_groups:
        yield from group["params"]
    for state in optimizer.state.values():
        yield from _tensors(state, depth=1)


def held_states(module: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_bytes: int) -> dict[str, int]:
    """The states record: the optimizer's own tensors only (a parameter it steps in place is counted once,
    as a parameter)."""
    seen: set[int] = set()
    params = storage_bytes(param_tensors(module), seen)
    return {"param_bytes": params, "grad_bytes": grad_bytes,
            "optimizer_bytes": storage_bytes(optimizer_tensors(optimizer), seen)}
