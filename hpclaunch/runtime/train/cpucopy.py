"""A copy of an engine's state in CPU memory, taken while training waits, for a checkpoint written in the
background (engine.py's `snapshot`, tensor_parallel.py's; checkpoint.py writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def to_cpu(obj: Any, memo: dict[tuple[Any, ...], torch.Tensor] | None = None) -> Any:
    """A copy of a state (nested dicts, lists, tuples) whose tensors are copies in CPU memory: what training
    changes next cannot reach it. Tensors that are one (tied weights: GPT-2's embedding and head) stay one copy,
    so the file stores them once, as torch.save of the live state would."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        key = (obj.untyped_storage().data_ptr(), obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()),
               obj.dtype, obj.device)
        if key not in memo:
            memo[key] = obj.detach().to("cpu", copy=True)
        return memo[key]
    if isinstance(obj, Mapping):
        return {k: to_cpu(v, memo) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v, memo) for v in obj)
    return obj
