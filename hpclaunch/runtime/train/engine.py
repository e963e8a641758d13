"""The two ways a recipe trains, behind one small interface the loop uses:

    TorchEngine      plain PyTorch (DDP when there is more than one rank): autocast, GradScaler for
                     fp16, no_sync on the micro-steps before the last, clip after backward (unscaled).
    DeepSpeedEngine  deepspeed.initialize with a client torch AdamW (no JIT-compiled optimizer) and
                     the same LR schedule; ZeRO stage, clipping and precision come from ds_config.json.

Both: zero_grad(); micro_step(inputs, last) -> detached loss of the micro-batch;
step() -> gradient norm (a tensor: no host sync); save(dir, client_state); load(dir) -> client_state;
snapshot(dir, client_state) -> {file name under dir: state copied to CPU} for a write in the background, or None
where the engine must write synchronously (a DeepSpeed config that says why: dscheckpoint.blocking).

TorchEngine also names its replica's live tensors and small state (replica_tensors, replica_meta), and makes and
loads them in a fresh engine (replica_prepare, replica_load_meta), for recovery from a data-parallel peer
(peer.py). DeepSpeedEngine under ZeRO-1/2 names this rank's own partition the same way (replica_tensors,
replica_meta, replica_load_meta), which each rank keeps in its node's memory and loads back itself (dspeer.py).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch

from hpclaunch.runtime.train.cpucopy import to_cpu
from hpclaunch.runtime.train.gradsync import GradSync
from hpclaunch.runtime.train.held import grad_tensors, held_states, storage_bytes
from hpclaunch.runtime.train.schedule import make_optimizer, make_scheduler

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch.nn.parallel import DistributedDataParallel
    from transformers import PreTrainedModel

    from hpclaunch.config.recipe import TrainSpec
    from hpclaunch.runtime.train.distributed import Dist

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Engine(Protocol):
    """What the loop and the checkpoints use of an engine (TorchEngine, DeepSpeedEngine)."""

    accum: int
    model: torch.nn.Module  # what runs forward: the module, its DDP/compiled wrapper, DeepSpeed's engine

    @property
    def lr(self) -> float: ...

    def zero_grad(self) -> None: ...

    def micro_step(self, inputs: dict[str, torch.Tensor], last: bool) -> torch.Tensor: ...

    def step(self) -> torch.Tensor: ...

    def forward_loss(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor: ...

    def save(self, path: Path, client_state: dict[str, Any]) -> None: ...

    def load(self, path: Path) -> dict[str, Any]: ...

    def snapshot(self, path: Path, client_state: dict[str, Any]) -> dict[str, Any] | None: ...

    def held_states(self) -> dict[str, int]: ...


def grad_sync(train: TrainSpec) -> str:
    """How a data-parallel torch engine averages gradients: train.grad_sync, where `auto` is DDP for a compiled
    model (torch._dynamo is imported anyway; its DDPOptimizer splits the graph at DDP's buckets), else hooks."""
    if train.grad_sync != "auto":
        return train.grad_sync
    return "ddp" if train.compile else "hooks"


class TorchEngine:
    def __init__(self, model: PreTrainedModel, train: TrainSpec, d: Dist, precision: str, grad_accum: int) -> None:
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.d, self.train, self.accum = d, train, grad_accum
        as_module: torch.nn.Module = model  # (mypy misreads transformers' @wraps(nn.Module.to) on model.to)
        as_module.to(d.device)
        if train.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.module = model
        # With peers, DDP or hpclaunch's GradSync (train.grad_sync; gradsync.py: DDP's work without importing
        # torch._dynamo); either's no_sync() skips the all-reduce on the micro-steps before the last
        self.ddp: DistributedDataParallel | None = None
        self.grads: GradSync | None = None
        if d.world_size > 1 and grad_sync(train) == "ddp":
            self.ddp = DDP(model, device_ids=None if d.accelerator == "cpu" else [d.device])
        elif d.world_size > 1:
            self.grads = GradSync(model)
        self.model: torch.nn.Module = model if self.ddp is None else self.ddp
        if train.compile:
            self.model = cast(torch.nn.Module, torch.compile(self.model, mode=train.compile_mode))  # OptimizedModule
        self.optimizer = make_optimizer(model, train, d.accelerator, own_step=True)  # plain tensors
        self.scheduler = make_scheduler(self.optimizer, train)
        self.dtype = _DTYPES.get(precision)
        self.scaler = torch.amp.GradScaler(d.accelerator) if precision == "fp16" else None
        self.grad_bytes: int | None = None  # the gradients held at the first step (hpclaunch/runtime/train/held.py)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.d.accelerator, dtype=self.dtype)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def zero_grad(self) -> None:
        # In place: the gradient tensors are reused, not re-allocated every step (measurably faster on CPU).
        self.optimizer.zero_grad(set_to_none=False)

    def micro_step(self, inputs: dict[str, torch.Tensor], last: bool) -> torch.Tensor:
        # Gradients are all-reduced only on the last micro-step of an optimizer step (a single rank has no
        # all-reduce; with torch.compile, self.model wraps the DDP module whose no_sync is used here).
        syncer = self.ddp if self.ddp is not None else self.grads
        sync = contextlib.nullcontext() if last or syncer is None else syncer.no_sync()
        with sync:
            with self.autocast():
                loss = self.model(**inputs).loss / self.accum
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        return loss.detach()

    def step(self) -> torch.Tensor:
        if self.grads is not None:
            self.grads.wait()  # the all-reduces launched during backward, averaged into .grad
        if self.scaler:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        if self.grad_bytes is None:
            self.grad_bytes = storage_bytes(grad_tensors(self.module))
        clip = self.train.grad_clip or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), clip)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        return norm.detach()

    def forward_loss(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        with self.autocast():
            return self.model(**inputs).loss.detach()

    def _state(self, client_state: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "client": client_state,
            "scaler": self.scaler.state_dict() if self.scaler else None,
        }

    def save(self, path: Path, client_state: dict[str, Any]) -> None:
        if self.d.is_main:
            torch.save(self._state(client_state), path / "state.pt")

    def snapshot(self, path: Path, client_state: dict[str, Any]) -> dict[str, Any] | None:
        """Rank 0's state.pt as a CPU copy (the replicas hold the same state); the others write only their RNG."""
        if not self.d.is_main:
            return {}
        state = to_cpu(self._state(client_state))
        self.d.synchronize()  # the copies from the device are complete before training changes the tensors
        return {"state.pt": state}

    def load(self, path: Path) -> dict[str, Any]:
        state = torch.load(path / "state.pt", map_location=self.d.device, weights_only=False)
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler and state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])
        return state["client"]

    def held_states(self) -> dict[str, int]:
        return held_states(self.module, self.optimizer, self.grad_bytes or 0)

    # --- the replica's state for recovery from a peer (hpclaunch/runtime/train/peer.py): live tensors, no copies
    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def replica_tensors(self) -> list[tuple[str, torch.Tensor]]:
        """Every tensor of the training state, named, in an order every replica shares: the model's state dict
        (a tensor tied to one named before, as GPT-2's head to its embedding, once), the optimizer's state per
        parameter, the fp16 loss scaler's scale and growth tracker."""
        out: list[tuple[str, torch.Tensor]] = []
        seen: set[tuple[int, int, tuple[int, ...]]] = set()
        for key, t in self.module.state_dict().items():
            ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
            if ident not in seen:
                seen.add(ident)
                out.append((f"model/{key}", t))
        for i, p in enumerate(self._params()):
            for key, v in sorted(self.optimizer.state.get(p, {}).items()):
                if isinstance(v, torch.Tensor):
                    out.append((f"optim/{i}/{key}", v))
        for key in ("_scale", "_growth_tracker"):  # GradScaler's state as tensors (its state_dict syncs the host)
            if self.scaler is not None and isinstance(t := getattr(self.scaler, key, None), torch.Tensor):
                out.append((f"scaler/{key}", t))
        return out

    def replica_meta(self) -> dict[str, Any]:
        """The small rest of the state (host values, read every snapshot): the scheduler, the optimizer's groups."""
        return {"scheduler": self.scheduler.state_dict(),
                "groups": [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]}

    def replica_prepare(self, shapes: list[tuple[str, torch.dtype, tuple[int, ...]]]) -> None:
        """Make the state a fresh engine has not made yet (the optimizer's, made at its first step; the loss
        scaler's) with the shapes a peer's snapshot has, for its tensors to be copied into."""
        for name, dtype, shape in shapes:
            kind, _, rest = name.partition("/")
            if kind == "scaler" and self.scaler is not None:
                setattr(self.scaler, rest, torch.zeros(shape, dtype=dtype, device=self.d.device))
        optimizer_state_like(self.optimizer, shapes)

    def replica_load_meta(self, meta: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(meta["scheduler"])
        for group, saved in zip(self.optimizer.param_groups, meta["groups"], strict=True):
            group.update(saved)


def optimizer_state_like(optimizer: torch.optim.Optimizer,
                         shapes: list[tuple[str, torch.dtype, tuple[int, ...]]]) -> None:
    """Make the optimizer's state (made lazily at its first step) with the shapes of a snapshot's `optim/<i>/<key>`
    tensors (i: the parameter's index in the optimizer's groups), for them to be copied into; torch places each on
    its parameter's device."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, dtype, shape in shapes:
        kind, _, rest = name.partition("/")
        if kind == "optim":
            i, key = rest.split("/", 1)
            state.setdefault(int(i), {})[key] = torch.zeros(shape, dtype=dtype)
    groups = optimizer.state_dict()["param_groups"]  # index lists for the parameters
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def _leaf_classes(model: torch.nn.Module, names: tuple[str, ...]) -> list[type]:
    found = {type(m).__name__: type(m) for m in model.modules()}
    missing = [n for n in names if n not in found]
    if missing:
        from hpclaunch.errors import ConfigError

        raise ConfigError(
            f"no module class {', '.join(missing)} in {type(model).__name__}",
            key="deepspeed.leaf_modules",
            hint="name module classes of the model",
        )
    return [found[n] for n in names]


class DeepSpeedEngine:
    def __init__(
        self, model: PreTrainedModel, train: TrainSpec, d: Dist, ds_config: Path, leaf_modules: tuple[str, ...] = ()
    ) -> None:
        import deepspeed

        self.d, self.train = d, train
        config = json.loads(Path(ds_config).read_text())
        self.accum = int(config.get("gradient_accumulation_steps", 1))
        if train.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        stage = int(config.get("zero_optimization", {}).get("stage", 0))
        self.zero_stage = stage  # recovery from node memory covers 1 and 2 (dspeer.py)
        self.pre_update: Callable[[], None] | None = None  # called before the optimizer's update (dspeer.py)
        if leaf_modules and stage == 3:  # ZeRO-3 gathers these blocks whole (MoE: experts used by only some tokens)
            from deepspeed.utils import set_z3_leaf_modules

            set_z3_leaf_modules(model, _leaf_classes(model, leaf_modules))
        optimizer = make_optimizer(model, train, d.accelerator)
        scheduler = make_scheduler(optimizer, train)
        self.model, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model, optimizer=optimizer, lr_scheduler=scheduler, config=config
        )
        self.module = self.model.module
        # DeepSpeed's fp32 path without ZeRO clips the gradients but keeps no norm: measured here instead
        half = any(config.get(k, {}).get("enabled") for k in ("bf16", "fp16"))
        self.own_norm: torch.Tensor | None = None if stage or half else torch.zeros(())
        if train.compile:  # torch.compile inside DeepSpeed's engine (its hooks stay outside the graph)
            self.model.compile(compile_kwargs={"mode": train.compile_mode})
        self.grad_bytes: int | None = None  # the gradients held at the first step (hpclaunch/runtime/train/held.py)
        from hpclaunch.runtime.train import dscheckpoint

        # None: checkpoints copied to CPU memory and written in the background; else why DeepSpeed writes them
        self.blocking = dscheckpoint.blocking(config, type(self.model.checkpoint_engine).__name__)
        self.said_blocking = False

    @property
    def lr(self) -> float:
        return self.model.get_lr()[0]

    def zero_grad(self) -> None:
        pass  # the engine zeroes gradients after each optimizer step

    def micro_step(self, inputs: dict[str, torch.Tensor], last: bool) -> torch.Tensor:
        loss = self.model(**inputs).loss
        self.model.backward(loss)  # scaled by 1/gradient_accumulation_steps inside
        if last and self.grad_bytes is None:
            zero = self.model.optimizer if self.model.zero_optimization() else None
            self.grad_bytes = storage_bytes(grad_tensors(self.module, zero))
        if last and self.own_norm is not None:
            self.own_norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), float("inf")).detach()
        if last and self.pre_update is not None:
            self.pre_update()  # the device waits for the last snapshot's copy of the tensors the update changes
        self.model.step()  # the optimizer steps (and clips) only at the accumulation boundary
        return loss.detach() / self.accum

    def step(self) -> torch.Tensor:
        if self.own_norm is not None:
            return self.own_norm
        norm = self.model.get_global_grad_norm()
        return norm.detach() if isinstance(norm, torch.Tensor) else torch.tensor(float(norm or 0.0))

    def forward_loss(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model(**inputs).loss.detach()

    def save(self, path: Path, client_state: dict[str, Any]) -> None:
        self.model.save_checkpoint(str(path), tag="deepspeed", client_state={"client": client_state})
        decoupled = getattr(self.model.checkpoint_engine, "is_decoupled", None)  # DeepSpeed >= 0.16
        if decoupled is not None and decoupled():  # its files are complete only once committed
            self.model._commit_decoupled_checkpoint()

    def load(self, path: Path) -> dict[str, Any]:
        _, state = self.model.load_checkpoint(str(path), tag="deepspeed")
        return state["client"]

    def snapshot(self, path: Path, client_state: dict[str, Any]) -> dict[str, Any] | None:
        """DeepSpeed's save_checkpoint with its files' states copied to CPU memory instead of written
        (dscheckpoint.CopyingEngine): every rank's own files, written in the background by checkpoint.py. None
        (the save blocks; said once in rank 0's log) where the config needs DeepSpeed to write them itself."""
        if self.blocking:
            if self.d.is_main and not self.said_blocking:
                print(f"hpclaunch: DeepSpeed checkpoints are written synchronously (training waits for each "
                      f"write): {self.blocking}", flush=True)
            self.said_blocking = True
            return None
        from hpclaunch.runtime.train.dscheckpoint import CopyingEngine, host_room

        live = self.model.checkpoint_engine
        self.model.checkpoint_engine = copying = CopyingEngine(live, path, host_room())
        try:
            self.save(path, client_state)
        finally:
            self.model.checkpoint_engine = live
        self.d.synchronize()  # the copies from the device are complete before training changes the tensors
        if copying.written:
            print(f"hpclaunch: rank {self.d.rank} wrote {', '.join(copying.written)} synchronously: its copy would "
                  "not fit in host memory", flush=True)
        return copying.files

    def held_states(self) -> dict[str, int]:
        """Under ZeRO the torch optimizer inside DeepSpeed's steps the fp32 master partitions."""
        inner = getattr(self.model.optimizer, "optimizer", self.model.optimizer)
        return held_states(self.module, inner, self.grad_bytes or 0)

    # --- this rank's own ZeRO-1/2 partition for recovery from node memory (dspeer.py): live tensors, no copies
    def replica_tensors(self) -> list[tuple[str, torch.Tensor]]:
        """This rank's part of the training state, named, in the same order on every launch: its fp32 master
        partition of each parameter group, the optimizer's state for it, and the module's buffers (replicated and
        small). The module's bf16/fp16/fp32 weights are not in it: they are every rank's partition, all-gathered
        (replica_load_meta)."""
        zero = self.model.optimizer
        out = [(f"fp32/{i}", t) for i, t in enumerate(zero.single_partition_of_fp32_groups)]
        inner = zero.optimizer
        for i, group in enumerate(inner.param_groups):
            for key, v in sorted(inner.state.get(group["params"][0], {}).items()):
                if isinstance(v, torch.Tensor):
                    out.append((f"optim/{i}/{key}", v))
        out += [(f"buffer/{name}", b) for name, b in self.module.named_buffers()]
        return out

    def replica_meta(self) -> dict[str, Any]:
        """The small rest (host values, read every snapshot): whose partition it is, the scheduler, the optimizer's
        groups, ZeRO's loss scaler and DeepSpeed's step counters."""
        zero, m = self.model.optimizer, self.model
        return {"rank": self.d.rank, "world_size": self.d.world_size, "zero_stage": self.zero_stage,
                "scheduler": self.scheduler.state_dict(),
                "groups": [{k: v for k, v in g.items() if k != "params"} for g in zero.optimizer.param_groups],
                "zero": {k: getattr(zero, k) for k in ("loss_scaler", "dynamic_loss_scale", "overflow", "clip_grad")},
                "engine": {k: getattr(m, k) for k in ("global_steps", "global_samples", "skipped_steps")}}

    def replica_prepare(self, shapes: list[tuple[str, torch.dtype, tuple[int, ...]]]) -> None:
        """A fresh engine's optimizer state (torch's AdamW makes it at the first step) with a snapshot's shapes;
        under ZeRO each group holds one parameter, its fp32 partition: `optim/<group>/<key>`."""
        inner = self.model.optimizer.optimizer
        if not inner.state:
            optimizer_state_like(inner, shapes)

    def replica_load_meta(self, meta: dict[str, Any]) -> None:
        """After replica_tensors were copied back on every rank (a collective): the small rest, then the module's
        weights all-gathered from every rank's fp32 partition, as DeepSpeed's own step ends."""
        zero = self.model.optimizer
        self.scheduler.load_state_dict(meta["scheduler"])
        for group, saved in zip(zero.optimizer.param_groups, meta["groups"], strict=True):
            group.update(saved)
        for obj, values in ((zero, meta["zero"]), (self.model, meta["engine"])):
            for key, value in values.items():
                setattr(obj, key, value)
        zero.update_lp_params()
