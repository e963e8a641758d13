"""Tensor parallel x data parallel for the torch recipes whose models carry a transformers `tp_plan`
(Mixtral, Llama, Mistral, Qwen...): a 2-D device mesh, data parallel outermost, tensor parallel innermost
(LiBai's `dp x tp`: ranks 0..tp-1 share one replica's shards, so a tensor-parallel group stays inside a node).

    ranks  0 1 | 2 3      tp = 2, dp = 2 on 4 devices: rank r is tensor rank r % tp of replica r // tp;
    replica  0 |   1      each replica reads its own micro-batches (data.Batches by replica, not by rank)

The model is loaded with transformers' `DistributedConfig(tp_size, dp_replicate_size)`: each rank reads only
its shards of the checkpoint (DTensors over the mesh: column-wise q/k/v and expert gate/up projections,
row-wise o/down projections) and FSDP2 replicates them over the data-parallel dimension, all-reducing the
gradients on the last micro-step of an accumulation. What this module adds is what the engine needs around
that model: gradient clipping over parameters that live on different meshes (torch's clip_grad_norm_ refuses
to stack their norms), checkpoints of each rank's local shards (the layout must be the same to resume), and
the bytes a rank really holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from hpclaunch.runtime.train.cpucopy import to_cpu
from hpclaunch.runtime.train.engine import _DTYPES, TorchEngine
from hpclaunch.runtime.train.held import local, storage_bytes
from hpclaunch.runtime.train.schedule import make_optimizer, make_scheduler

if TYPE_CHECKING:
    from transformers import DistributedConfig, PreTrainedModel

    from hpclaunch.config.recipe import TrainSpec
    from hpclaunch.runtime.train.distributed import Dist


def distributed_config(d: Dist) -> DistributedConfig:
    """transformers' mesh for this job: tp_size ranks per replica, replicas data-parallel."""
    from transformers import DistributedConfig

    _quiet()
    return DistributedConfig(tp_size=d.tensor_parallel, dp_replicate_size=d.dp_size if d.dp_size > 1 else None)


def compact_shards(model: torch.nn.Module) -> int:
    """Give every local shard a storage of its own size; the bytes this frees. transformers slices the
    column-wise shards (q, k, v, embeddings, LM head) out of the loaded tensors as views, which keeps each
    whole tensor alive on every rank: for Mixtral-8x7B the whole embeddings and attention projections."""
    freed = 0
    with torch.no_grad():
        for p in model.parameters():
            shard = local(p)
            extra = shard.untyped_storage().nbytes() - shard.numel() * shard.element_size()
            if extra > 0:
                fresh = shard.clone()  # the same tensor object (FSDP's and the optimizer's), a new storage
                shard.set_(fresh.untyped_storage(), 0, fresh.shape, fresh.stride())
                freed += extra
    return freed


def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """The global L2 norm of the gradients, and the gradients scaled to at most `max_norm`, as
    torch.nn.utils.clip_grad_norm_ does; parameters may live on different meshes (the router on the
    data-parallel mesh, the projections on dp x tp). Each mesh's norm is reduced over its ranks (a
    collective, no host sync) before they are combined."""
    from torch.distributed.tensor import DTensor

    groups: dict[Any, list[torch.Tensor]] = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(getattr(p.grad, "device_mesh", None), []).append(p.grad)
    if not groups:
        return torch.zeros(())
    squares = []
    for grads in groups.values():
        norm = torch.nn.utils.get_total_norm(grads, 2.0)
        squares.append((norm.full_tensor() if isinstance(norm, DTensor) else norm) ** 2)
    total = torch.stack(squares).sum().sqrt()
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_([local(g) for grads in groups.values() for g in grads], coef)
    return total


def _quiet() -> None:
    """Two messages every rank would print at every step, about nothing this job does: FSDP2 warns that a
    module returned a view (an in-place op on it would skip a hook; transformers' Mixtral does none), and
    DTensor that the gradient norm is reduced over two mesh dimensions in two all-reduces (one scalar)."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)


class TensorParallelEngine(TorchEngine):
    """The Engine of hpclaunch/runtime/train/engine.py for a model sharded by `distributed_config`: TorchEngine's
    autocast, learning rate, zero_grad, eval forward and held states; its own micro-step (FSDP2's gradient
    sync instead of DDP's no_sync), clipping across meshes and per-rank checkpoints."""

    def __init__(self, model: PreTrainedModel, train: TrainSpec, d: Dist, precision: str, grad_accum: int) -> None:
        # not TorchEngine.__init__: the model is already placed and sharded; no DDP wrapper, no GradScaler
        self.d, self.train, self.accum = d, train, grad_accum
        if train.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.module = model
        self.model = model
        self.optimizer = make_optimizer(model, train, d.accelerator)
        self.scheduler = make_scheduler(self.optimizer, train)
        self.dtype = _DTYPES.get(precision)
        self.scaler = None
        self.grad_bytes = None

    def micro_step(self, inputs: dict[str, torch.Tensor], last: bool) -> torch.Tensor:
        sync = getattr(self.module, "set_requires_gradient_sync", None)  # FSDP2 over the replicas
        if sync is not None:
            sync(last)  # all-reduce over the replicas on the last micro-step only
        with self.autocast():
            loss = self.model(**inputs).loss / self.accum
        loss.backward()
        return loss.detach()

    def step(self) -> torch.Tensor:
        if self.grad_bytes is None:
            self.grad_bytes = storage_bytes(p.grad for p in self.module.parameters() if p.grad is not None)
        norm = clip_grad_norm(self.module.parameters(), self.train.grad_clip or float("inf"))
        self.optimizer.step()
        self.scheduler.step()
        return norm.detach()

    def _file(self, path: Path) -> Path:
        return path / f"tp-rank-{self.d.rank:05d}.pt"

    def _shards(self, client_state: dict[str, Any]) -> dict[str, Any]:
        """This rank's local shards and its optimizer's (the job's layout is saved with them)."""
        optimizer = self.optimizer.state_dict()
        optimizer["state"] = {k: {n: local(v) for n, v in s.items()} for k, s in optimizer["state"].items()}
        return {
            "layout": {"world_size": self.d.world_size, "tensor_parallel": self.d.tensor_parallel},
            "model": {n: local(t) for n, t in self.module.state_dict().items()},
            "optimizer": optimizer,
            "scheduler": self.scheduler.state_dict(),
            "client": client_state,
        }

    def save(self, path: Path, client_state: dict[str, Any]) -> None:
        """Every rank writes its own file."""
        torch.save(self._shards(client_state), self._file(path))

    def snapshot(self, path: Path, client_state: dict[str, Any]) -> dict[str, Any] | None:
        """Every rank's own file as a CPU copy (each holds other shards), written in the background."""
        state = to_cpu(self._shards(client_state))
        self.d.synchronize()
        return {self._file(Path()).name: state}

    def load(self, path: Path) -> dict[str, Any]:
        from hpclaunch.errors import HpclaunchError

        file = self._file(path)
        state = torch.load(file, map_location=self.d.device, weights_only=False) if file.is_file() else None
        here = {"world_size": self.d.world_size, "tensor_parallel": self.d.tensor_parallel}
        if state is None or state["layout"] != here:
            saved = state["layout"] if state else "another layout (no file for this rank)"
            raise HpclaunchError(
                f"checkpoint {path} was written by {saved}; this job is {here}",
                hint="resume with the layout and parallel.model_parallel it was saved with, or start a new run")
        with torch.no_grad():
            for name, t in self.module.state_dict().items():
                local(t).copy_(state["model"][name])
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.optimizer.load_state_dict(state["optimizer"])
        for p in params:  # the moments come back as local tensors: give them their parameter's placement
            for n, v in self.optimizer.state.get(p, {}).items():
                if _needs_placement(p, v):
                    self.optimizer.state[p][n] = _like(p, v)
        self.scheduler.load_state_dict(state["scheduler"])
        return state["client"]


def _needs_placement(p: torch.Tensor, v: torch.Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(p, DTensor) and not isinstance(v, DTensor) and v.dim() > 0


def _like(p: Any, v: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return DTensor.from_local(v, p.device_mesh, p.placements, shape=p.shape, stride=p.stride())
