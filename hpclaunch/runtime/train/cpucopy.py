"""A copy of an engine's state in CPU memory, taken while training waits, for a checkpoint written in the
background (engine.py's `snapshot`, tensor_parallel.py's, dscheckpoint.py's for DeepSpeed; checkpoint.py writes
it)."""

from __future__ import annotations

import copy
import enum
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

# Values written as they are: training cannot change them (immutable)
_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), torch.dtype, torch.device, torch.Size, enum.Enum,
              range, type)


def to_cpu(obj: Any, memo: dict[tuple[Any, ...], torch.Tensor] | None = None) -> Any:
    """A copy of a state (nested dicts, lists, tuples) whose tensors are copies in CPU memory: what training
    changes next cannot reach it. Tensors that are one (tied weights: GPT-2's embedding and head) stay one copy,
    so the file stores them once, as torch.save of the live state would. An OrderedDict stays one, with its
    `_metadata` (a module's state_dict versions); any other object is deep-copied, since it is pickled only later
    (DeepSpeed's optimizer state holds its live loss scaler); one that cannot be copied is kept as it is."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        key = (obj.untyped_storage().data_ptr(), obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()),
               obj.dtype, obj.device)
        if key not in memo:
            memo[key] = obj.detach().to("cpu", copy=True)
        return memo[key]
    if isinstance(obj, _IMMUTABLE):
        return obj
    if isinstance(obj, Mapping):
        items = ((k, to_cpu(v, memo)) for k, v in obj.items())
        if not isinstance(obj, OrderedDict):
            return dict(items)
        out = OrderedDict(items)
        if hasattr(obj, "_metadata"):
            out._metadata = copy.deepcopy(obj._metadata)  # type: ignore[attr-defined]
        return out
    if isinstance(obj, (list, tuple)):
        values = [to_cpu(v, memo) for v in obj]
        if hasattr(obj, "_fields"):  # a namedtuple
            return type(obj)(*values)
        return values if isinstance(obj, list) else type(obj)(values)
    try:
        return copy.deepcopy(obj)
    except Exception:  # a handle (a lock, a process group): not training state that changes
        return obj
