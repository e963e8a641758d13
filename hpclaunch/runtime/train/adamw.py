"""torch's AdamW with its fused kernel, stepped without importing torch's compiler.

`torch.optim.AdamW.step` imports `torch._dynamo` on every call (its `_use_grad_for_differentiable` wrapper marks
graph breaks), and `add_param_group`, `zero_grad`, `state_dict` and `load_state_dict` import it on their first call
(`torch._disable_dynamo`): 0.9-1.9 s of CPU per rank with sympy, for a model that is never compiled. `FusedAdamW` is
`torch.optim.AdamW(fused=True)` (its defaults, its state: `step`, `exp_avg`, `exp_avg_sq` per parameter, the same
state dict) whose step calls the same kernel, `torch._fused_adamw_`, directly, and whose four other methods are
torch's own without the wrapper that imports the compiler. What the wrappers do (keep torch.compile from tracing
into the optimizer) has no use here: the engine compiles the model, never the optimizer step.

GradScaler (fp16) works as with torch's fused AdamW: it sets `grad_scale` and `found_inf` on the optimizer, the
kernel skips the update where `found_inf` is set, and the step counts are taken back.

May import: torch. Imported only by schedule.make_optimizer, inside a rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# Devices whose torch build has the fused AdamW kernel (torch/optim/optimizer.py: _get_fused_kernels_supported_devices).
FUSED_DEVICES = ("cpu", "cuda")


def _unwrapped(name: str) -> Callable[..., Any]:
    """torch.optim.Optimizer's method without its `torch._disable_dynamo` wrapper (functools.wraps keeps the
    function it wraps in __wrapped__; a torch without the wrapper has the method itself)."""
    method = getattr(torch.optim.Optimizer, name)
    return getattr(method, "__wrapped__", method)


class FusedAdamW(torch.optim.AdamW):
    add_param_group = _unwrapped("add_param_group")
    zero_grad = _unwrapped("zero_grad")
    state_dict = _unwrapped("state_dict")
    load_state_dict = _unwrapped("load_state_dict")

    def __init__(self, params: Any, **hyper: Any) -> None:
        super().__init__(params, fused=True, **hyper)
        for group in self.param_groups:
            if group["amsgrad"] or group["maximize"] or group["differentiable"] or group["capturable"]:
                raise ValueError("FusedAdamW steps plain AdamW: no amsgrad, maximize, differentiable or capturable")

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grad_scale: torch.Tensor | None = getattr(self, "grad_scale", None)
        found_inf: torch.Tensor | None = getattr(self, "found_inf", None)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            by_kind: dict[tuple[torch.device, torch.dtype], tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
            for p in group["params"]:
                if p.grad is not None:
                    params, grads = by_kind.setdefault((p.device, p.dtype), ([], []))
                    params.append(p)
                    grads.append(p.grad)
            for (device, _), (params, grads) in by_kind.items():
                states = [self._state(p) for p in params]
                steps = [s["step"] for s in states]
                torch._foreach_add_(steps, 1)
                inf = found_inf.to(device, non_blocking=True) if found_inf is not None else None
                torch._fused_adamw_(
                    params,
                    grads,
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    [],
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=False,
                    grad_scale=grad_scale.to(device, non_blocking=True) if grad_scale is not None else None,
                    found_inf=inf,
                )
                if inf is not None:
                    torch._foreach_sub_(steps, [inf] * len(steps))
        return loss

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """The parameter's AdamW state, made as torch's fused AdamW makes it on the first step."""
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state
