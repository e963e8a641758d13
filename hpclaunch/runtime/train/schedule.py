"""Learning rate: linear warmup to `lr`, then cosine decay to `min_lr` at `max_steps` (nanoGPT)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.optim.lr_scheduler import LambdaLR

    from hpclaunch.config.recipe import TrainSpec


def lr_at(step: int, *, lr: float, min_lr: float, warmup: int, max_steps: int) -> float:
    """The learning rate for optimizer step `step` (0-based)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= max_steps:
        return min_lr
    progress = (step - warmup) / max(1, max_steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


def make_scheduler(optimizer: torch.optim.Optimizer, train: TrainSpec) -> LambdaLR:
    """A LambdaLR (its state goes into checkpoints) following lr_at."""
    from torch.optim.lr_scheduler import LambdaLR

    def factor(step: int) -> float:
        return (
            lr_at(
                step, lr=train.lr, min_lr=train.min_lr, warmup=train.warmup_steps, max_steps=train.max_steps
            )
            / train.lr
        )

    return LambdaLR(optimizer, factor)


def make_optimizer(
    model: torch.nn.Module, train: TrainSpec, device_type: str, *, own_step: bool = False
) -> torch.optim.Optimizer:
    """AdamW, weight decay on matrices only, fused where the device has a fused kernel. `own_step`: hpclaunch's
    FusedAdamW (adamw.py: the same kernel and state, stepped without importing torch's compiler) on a device with
    the kernel, for an optimizer that steps plain tensors (not DeepSpeed's, not DTensors)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    matrix = [len(getattr(p, "ds_shape", p.shape)) >= 2 for p in params]  # ZeRO-3 shards are flat: ds_shape
    groups = [
        {"params": [p for p, m in zip(params, matrix, strict=True) if m], "weight_decay": train.weight_decay},
        {"params": [p for p, m in zip(params, matrix, strict=True) if not m], "weight_decay": 0.0},
    ]
    hyper: dict[str, Any] = {"lr": train.lr, "betas": tuple(train.adam_betas), "eps": train.adam_eps}
    if own_step:
        from hpclaunch.runtime.train.adamw import FUSED_DEVICES, FusedAdamW

        if device_type in FUSED_DEVICES:
            return FusedAdamW(groups, **hyper)
    kwargs: dict[str, Any] = {"fused": True} if device_type in ("cuda", "musa", "npu") else {}
    try:
        return torch.optim.AdamW(groups, **hyper, **kwargs)
    except (RuntimeError, TypeError):  # no fused kernel for this device
        return torch.optim.AdamW(groups, **hyper)
