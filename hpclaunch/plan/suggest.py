"""When a job does not fit: the nearest settings that do, each as the flags that ask for it.

One change at a time first, nearest first within each kind (activation checkpointing; a smaller micro-batch
with more accumulation at the same global batch; a higher ZeRO stage; offload; more devices); when no
single change fits, pairs of them. Every candidate is planned with the same arithmetic (plan/memory.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import combinations

from hpclaunch.plan.memory import Limits, ModelFacts, Setup, estimate, fits


@dataclass(frozen=True)
class Suggestion:
    change: tuple[str, ...]  # command-line words, e.g. ("--set", "train.activation_checkpointing=true")
    setup: Setup
    per_device_bytes: float

    @property
    def text(self) -> str:
        return " ".join(self.change)


def _set(key: str, value: object) -> tuple[str, str]:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return ("--set", f"{key}={text}")


def _checkpointing(s: Setup) -> Iterator[tuple[tuple[str, ...], Setup]]:
    if s.checkpointing or (s.framework == "mindspore" and s.accelerator == "cpu"):
        return
    key = "parallel.recompute" if s.framework == "mindspore" else "train.activation_checkpointing"
    # checkpointed models train through the transformers forward (config/forwards.py): all the logits again
    yield _set(key, True), replace(s, checkpointing=True, fast_forward=False, logit_share=1.0)


def _micro_batch(s: Setup) -> Iterator[tuple[tuple[str, ...], Setup]]:
    mb = s.micro_batch // 2
    while mb >= 1:
        if s.micro_batch % mb == 0:
            accum = s.grad_accum * (s.micro_batch // mb)
            yield (*_set("train.micro_batch_size", mb), *_set("train.grad_accum", accum)), \
                replace(s, micro_batch=mb, grad_accum=accum)
        mb //= 2


def _zero(s: Setup) -> Iterator[tuple[tuple[str, ...], Setup]]:
    if s.world_size == 1 or s.tensor_parallel > 1 or s.framework != "torch":  # ZeRO: the torch recipes' alone
        return
    first = s.zero_stage + 1 if s.engine == "deepspeed" else 1
    for stage in range(first, 4):
        words = (*_set("launcher", "deepspeed"),) if s.engine == "ddp" else ()
        yield (*words, *_set("deepspeed.zero_stage", stage)), replace(s, engine="deepspeed", zero_stage=stage)


def _offload(s: Setup) -> Iterator[tuple[tuple[str, ...], Setup]]:
    if s.engine != "deepspeed" or (s.zero_stage == 0 and s.world_size > 1):
        return
    if s.zero_stage == 0:  # one rank runs stage 0 unless it offloads (JobSpec.zero_stage): offload under ZeRO-3
        for words, setup in _offload(replace(s, zero_stage=3)):
            yield (*_set("deepspeed.zero_stage", 3), *words), setup
        return
    if not s.offload_optimizer:
        yield _set("deepspeed.offload_optimizer", True), replace(s, offload_optimizer=True)
    if s.zero_stage == 3 and not s.offload_param:
        words = () if s.offload_optimizer else _set("deepspeed.offload_optimizer", True)
        yield (*words, *_set("deepspeed.offload_param", True)), replace(s, offload_optimizer=True, offload_param=True)


def _devices(s: Setup, limits: Limits) -> Iterator[tuple[tuple[str, ...], Setup]]:
    """More devices: more per node on as many nodes, or more nodes of as many devices each; the global batch
    kept where the accumulation steps divide."""
    allowed = limits.devices_per_node or tuple(range(1, limits.max_gpus_per_node + 1))
    wider = {(s.nodes * g, s.nodes, g) for g in allowed if s.gpus_per_node < g <= limits.max_gpus_per_node}
    longer = {(n * s.gpus_per_node, n, s.gpus_per_node) for n in range(s.nodes + 1, limits.max_nodes + 1)}
    layouts = sorted(wider | longer)
    tp = s.tensor_parallel
    for world, nodes, gpus in layouts:
        if world % tp:
            continue  # a replica's tensor-parallel ranks must fill the devices
        words: tuple[str, ...] = ("--layout", f"{nodes}n{gpus}g")
        accum, dp = s.grad_accum, world // tp
        if (s.grad_accum * s.dp_size) % dp == 0:
            accum = s.grad_accum * s.dp_size // dp
            if accum != s.grad_accum:
                words = (*words, *_set("train.grad_accum", accum))
        yield words, replace(s, nodes=nodes, gpus_per_node=gpus, grad_accum=accum)


def suggestions(m: ModelFacts, s: Setup, limits: Limits, most: int = 5) -> list[Suggestion]:
    kinds = [list(_checkpointing(s)), list(_micro_batch(s)), list(_zero(s)), list(_offload(s)),
             list(_devices(s, limits))]
    found: list[Suggestion] = []
    for candidates in kinds:
        for words, setup in candidates:
            if fits(m, setup, limits):
                found.append(Suggestion(words, setup, estimate(m, setup).total))
                break
    if found:
        return found[:most]
    for first, second in combinations(kinds, 2):
        hit = _first_pair(m, s, first, second, limits)
        if hit is not None:
            found.append(hit)
    return sorted(found, key=lambda x: len(x.change))[:most]


def _first_pair(m: ModelFacts, s: Setup, first: list[tuple[tuple[str, ...], Setup]],
                second: list[tuple[tuple[str, ...], Setup]], limits: Limits) -> Suggestion | None:
    for words_a, a in first:
        for words_b, b in second:
            merged = _merge(s, a, b)
            if fits(m, merged, limits):
                return Suggestion(_words(s, merged, (*words_a, *words_b)), merged, estimate(m, merged).total)
    return None


def _words(base: Setup, merged: Setup, words: tuple[str, ...]) -> tuple[str, ...]:
    """Two changes' words with one train.grad_accum (the merged value) where both set it."""
    pairs = [(words[i], words[i + 1]) for i in range(0, len(words), 2)]
    kept = [w for pair in pairs if not pair[1].startswith("train.grad_accum=") for w in pair]
    if merged.grad_accum != base.grad_accum:
        kept += _set("train.grad_accum", merged.grad_accum)
    return tuple(kept)


def _merge(base: Setup, a: Setup, b: Setup) -> Setup:
    """Both changes over `base`: each field takes the value the change that touched it gave."""
    changes = {k: v for k, v in vars(a).items() if getattr(base, k) != v}
    changes.update({k: v for k, v in vars(b).items() if getattr(base, k) != v})
    if a.grad_accum != base.grad_accum and b.grad_accum != base.grad_accum:
        changes["grad_accum"] = max(1, base.grad_accum * (a.grad_accum * b.grad_accum) // base.grad_accum ** 2)
    return replace(base, **changes)
