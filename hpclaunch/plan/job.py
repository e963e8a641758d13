"""The memory plan of a resolved job: its model's facts (plan/model.py), its setup from the JobSpec, the
estimate per device (plan/memory.py) against the partition's device memory, and what fits when it does
not (plan/suggest.py). Used by `hpclaunch plan` and by preflight's fit check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import DoesNotFit
from hpclaunch.plan.memory import GIB, Estimate, Limits, ModelFacts, Setup, checkpoint_bytes, estimate, fits
from hpclaunch.plan.model import model_facts

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.plan.suggest import Suggestion


def setup_of(spec: JobSpec, facts: ModelFacts) -> Setup:
    from hpclaunch.config.precision import precision_for

    ds = spec.deepspeed
    deepspeed = spec.recipe.launcher == "deepspeed"
    t = spec.recipe.train
    par = spec.recipe.parallel
    mindspore_run = spec.recipe.launcher == "msrun"
    checkpointing = t.activation_checkpointing
    if mindspore_run:  # MindSpore recomputes with parallel.recompute, on GPU and Ascend (not on its CPU backend)
        checkpointing = bool(par and par.recompute) and spec.profile.accelerator != "cpu"
    return Setup(engine="deepspeed" if deepspeed else "ddp", zero_stage=spec.zero_stage,
                 offload_optimizer=deepspeed and ds.offload_optimizer, offload_param=deepspeed and ds.offload_param,
                 precision=precision_for(spec), nodes=spec.nodes, gpus_per_node=spec.gpus_per_node,
                 micro_batch=t.micro_batch_size, grad_accum=spec.grad_accum, seq_len=t.seq_len,
                 checkpointing=checkpointing, accelerator=spec.profile.accelerator,
                 compiled=t.compile,
                 tensor_parallel=par.model_parallel if par is not None and spec.recipe.launcher == "torchrun" else 1,
                 framework="mindspore" if mindspore_run else "torch",
                 **_forward(spec, facts.model_type, checkpointing))


def _forward(spec: JobSpec, model_type: str, checkpointing: bool) -> dict[str, Any]:
    """The training forward's part of the setup (config/forwards.py): whether it runs, and the share of the
    tokens whose logits it computes."""
    from hpclaunch.config.forwards import has_training_forward

    par = spec.recipe.parallel
    tp = par.model_parallel if par is not None and spec.recipe.launcher == "torchrun" else 1
    if not has_training_forward(model_type, spec.recipe.task, checkpointing=checkpointing, tensor_parallel=tp):
        return {}
    share = spec.recipe.train.mlm_probability if spec.recipe.task == "masked-lm" else 1.0
    return {"fast_forward": True, "logit_share": share}


def limits_of(spec: JobSpec) -> Limits:
    from hpclaunch.config.rules import DEVICES_PER_NODE

    part = spec.partition_spec
    device = part.gpu_memory_gb * GIB if part.gpu_memory_gb else None
    host = part.memory_gb * GIB if part.memory_gb else None
    return Limits(device, host, part.max_nodes, part.gpus_per_node,
                  DEVICES_PER_NODE.get(spec.profile.accelerator, ()))


@dataclass(frozen=True)
class Plan:
    spec: JobSpec
    facts: ModelFacts
    setup: Setup
    estimate: Estimate
    limits: Limits
    suggestions: tuple[Suggestion, ...]

    @property
    def fits(self) -> bool | None:
        """None when the partition does not say how much memory its devices have (never refused then)."""
        return None if self.limits.device_bytes is None else fits(self.facts, self.setup, self.limits)

    @property
    def checkpoint_bytes(self) -> float:
        return checkpoint_bytes(self.facts, self.setup)

    @property
    def tokens_per_step(self) -> int:
        return self.spec.global_batch_size * self.setup.seq_len

    @property
    def device_gib(self) -> float | None:
        return None if self.limits.device_bytes is None else self.limits.device_bytes / GIB

    @property
    def where(self) -> str:
        part = self.spec.partition_spec
        gpu = f"{part.gpu_type}, " if part.gpu_type else ""
        memory = f"{self.device_gib:g} GiB per device" if self.device_gib else "device memory unknown"
        return f"{self.spec.profile.name}/{self.spec.partition} ({gpu}{memory})"

    @property
    def how(self) -> str:
        s = self.setup
        engine = "DDP" if s.engine == "ddp" else f"DeepSpeed ZeRO-{s.zero_stage}"
        if s.framework == "mindspore":
            engine = "MindSpore data parallel"
        if s.tensor_parallel > 1:
            engine = f"tensor parallel {s.tensor_parallel} x data parallel {s.dp_size}"
        offload = [n for n, on in (("optimizer", s.offload_optimizer), ("params", s.offload_param)) if on]
        return f"{engine}{' offload ' + '+'.join(offload) if offload else ''}, {s.precision}"

    def to_json(self) -> dict[str, Any]:
        from hpclaunch.config.base import dump

        e, s = self.estimate, self.setup
        return {
            "recipe": self.spec.recipe.name, "preset": self.spec.preset, "profile": self.spec.profile.name,
            "partition": self.spec.partition, "layout": self.spec.layout, "fits": self.fits,
            "params": self.facts.params, "tokens_per_step": self.tokens_per_step,
            "global_batch": self.spec.global_batch_size, "micro_batch": s.micro_batch, "grad_accum": s.grad_accum,
            "seq_len": s.seq_len, "precision": s.precision, "engine": s.engine, "zero_stage": s.zero_stage,
            "tensor_parallel": s.tensor_parallel, "data_parallel": s.dp_size,
            "offload_optimizer": s.offload_optimizer, "offload_param": s.offload_param,
            "activation_checkpointing": s.checkpointing,
            "params_gib": _gib(e.params), "grads_gib": _gib(e.grads), "optimizer_gib": _gib(e.optimizer),
            "checkpoint_gib": _gib(self.checkpoint_bytes),
            "model_states_gib": _gib(e.model_states), "activations_gib": _gib(e.activations),
            "buffers_gib": _gib(e.buffers), "reserve_gib": _gib(e.reserve), "per_device_gib": _gib(e.total),
            "device_gib": self.device_gib, "host_offload_gib_per_node": _gib(e.host_per_node),
            "host_gib_per_node": None if self.limits.host_bytes is None else _gib(self.limits.host_bytes),
            "micro_batch_auto": None if self.spec.micro_batch_auto is None else dump(self.spec.micro_batch_auto),
            "suggestions": [{"change": x.text, "layout": x.setup.layout, "per_device_gib": _gib(x.per_device_bytes)}
                            for x in self.suggestions],
        }

    def summary(self) -> str:
        """One line: what a dry run prints."""
        e = self.estimate
        verdict = {True: "fits", False: "does NOT fit", None: "not checked"}[self.fits]
        of = f" of {self.device_gib:g}" if self.device_gib else ""
        return (f"plan: {_count(self.facts.params)} parameters, {_gib(e.total):.1f}{of} GiB per device on "
                f"{self.spec.layout} ({self.how}; model states {size_text(e.model_states)}, activations "
                f"{size_text(e.activations)}): {verdict}")

    def lines(self) -> list[str]:
        """The whole plan, for `hpclaunch plan`."""
        e, s = self.estimate, self.setup
        preset = f" (preset {self.spec.preset})" if self.spec.preset else ""
        rows = [
            f"{self.spec.recipe.name}{preset} on {self.where}, {self.spec.layout}, {self.how}",
            f"  parameters         {_count(self.facts.params)} ({self.facts.params:,})",
            f"  tokens per step    {self.tokens_per_step:,} (global batch {self.spec.global_batch_size} = micro-batch "
            f"{s.micro_batch} x accumulation {s.grad_accum} x "
            + (f"{s.dp_size} replicas of {s.tensor_parallel} devices" if s.tensor_parallel > 1
               else f"{s.world_size} devices") + f"; seq_len {s.seq_len})",
            "  per device (GiB)",
            f"    parameters       {_gib(e.params):8.2f}",
            f"    gradients        {_gib(e.grads):8.2f}",
            f"    optimizer states {_gib(e.optimizer):8.2f}",
            f"    model states     {_gib(e.model_states):8.2f}",
            f"    activations      {_gib(e.activations):8.2f}  (activation checkpointing "
            f"{'on' if s.checkpointing else 'off'})",
            f"    buffers          {_gib(e.buffers):8.2f}  (communication buckets, ZeRO-3 gathered layers)",
            f"    reserve          {_gib(e.reserve):8.2f}  (runtime context, allocator fragmentation)",
            f"    total            {_gib(e.total):8.2f}" + (f" of {self.device_gib:g}" if self.device_gib else ""),
        ]
        if e.host_per_node:
            host = f" of {_gib(self.limits.host_bytes):g}" if self.limits.host_bytes else ""
            rows.append(f"  host memory per node for offload: {_gib(e.host_per_node):.2f}{host} GiB")
        verdict = {True: "fits", False: "does NOT fit", None: "not checked: the partition does not give "
                   "gpu_memory_gb"}[self.fits]
        rows.append(f"  {verdict}")
        if self.suggestions:
            rows.append("  fits with:")
            rows += [f"    {x.text}  ->  {_gib(x.per_device_bytes):.1f} GiB per device" for x in self.suggestions]
        elif self.fits is False:
            rows.append("  no nearby setting fits: a larger partition, or a smaller model / seq_len")
        return rows


def _gib(n: float | None) -> float:
    return round((n or 0.0) / GIB, 3)


def size_text(n: float) -> str:
    """Bytes as the plan says them: GiB, or MiB under a tenth of one."""
    return f"{n / GIB:.1f} GiB" if n >= GIB / 10 else f"{n / (1 << 20):.1f} MiB"


def _count(n: int) -> str:
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def plan_job(spec: JobSpec) -> Plan:
    """The plan of a resolved job; NoPlan (an HpclaunchError) when its model cannot be planned here."""
    facts = model_facts(spec)
    setup = setup_of(spec, facts)
    limits = limits_of(spec)
    found: tuple[Suggestion, ...] = ()
    if not fits(facts, setup, limits):
        from hpclaunch.plan.suggest import suggestions

        found = tuple(suggestions(facts, setup, limits))
    return Plan(spec, facts, setup, estimate(facts, setup), limits, found)


def check_fit(spec: JobSpec) -> None:
    """Preflight: DoesNotFit, with the numbers and what would fit, when the plan says the job needs more
    memory per device than the partition has. Silent when it fits, when the device memory is unknown and
    when no plan can be made here (the asset check names a missing config; no torch: nothing to check)."""
    from hpclaunch.errors import NoPlan

    try:
        plan = plan_job(spec)
    except NoPlan:
        return
    if plan.fits is not False:
        return
    e = plan.estimate
    host = ""
    if plan.limits.host_bytes is not None and e.host_per_node > plan.limits.host_bytes:
        host = (f"; offload needs {_gib(e.host_per_node):.1f} GiB of host memory per node of "
                f"{_gib(plan.limits.host_bytes):g}")
    fixes = "; ".join(f"{x.text} ({_gib(x.per_device_bytes):.1f} GiB)" for x in plan.suggestions) or "none nearby"
    raise DoesNotFit(
        f"{spec.recipe.name} needs {_gib(e.total):.1f} GiB per device on {spec.layout} ({plan.how}: model states "
        f"{_gib(e.model_states):.1f}, activations {_gib(e.activations):.1f}, buffers {_gib(e.buffers):.1f}, reserve "
        f"{_gib(e.reserve):.1f}) but the devices of {plan.where} have {plan.device_gib:g} GiB{host}",
        hint=f"fits with: {fixes}; details: {plan_command(spec)}; queue it anyway with --skip-fit-check")


def plan_command(spec: JobSpec) -> str:
    """`hpclaunch plan` of this very job, to paste: the recipe, profile, preset, layout, partition and --set."""
    import shlex

    words = ["hpclaunch plan", spec.recipe_arg, "--profile", spec.profile_arg]
    if spec.preset:
        words += ["--preset", shlex.quote(spec.preset)]
    words += ["--layout", spec.layout, "--partition", shlex.quote(spec.partition)]
    words += [f"--set {shlex.quote(item)}" for item in spec.sets]
    return " ".join(words)
