"""`--set train.micro_batch_size=auto`: the largest micro-batch the memory plan says fits the partition's devices
with a margin (the profile's `defaults.memory_margin`, 10 % unless it says otherwise), the recipe's global batch
kept through gradient accumulation (docs/plan.md).

Resolve (hpclaunch/submission/resolve.py) stays the only place layers merge: this module plans and answers with
the `--set` items that apply the choice, and resolve merges them like any other.

    per replica  B = global batch / data parallel (what micro-batch x accumulation make)
    fits up to   M = the largest micro-batch (at most B) whose plan is within device memory x (1 - margin)
    chosen         the largest divisor of B not above M; accumulation B / chosen
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from hpclaunch.errors import ConfigError, DoesNotFit, NoPlan

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec, MicroBatchAuto

KEY = "train.micro_batch_size"
MOST_SCANNED = 1 << 16  # micro-batches planned at most (each plan is arithmetic: microseconds)


def auto_item(sets: Sequence[str]) -> int | None:
    """The index of the `--set train.micro_batch_size=auto` that decides (the last set of the key), else None."""
    last = None
    for i, item in enumerate(sets):
        key, _, value = item.partition("=")
        if key.strip() == KEY:
            last = i if value.strip().lower() == "auto" else None
    return last


def _batch_sets(micro: int, per_replica: int, global_batch: int) -> tuple[str, ...]:
    return (f"{KEY}={micro}", f"train.grad_accum={per_replica // micro}", f"train.global_batch_size={global_batch}")


def resolve_auto(resolve_with: Callable[[tuple[str, ...]], JobSpec], sets: Sequence[str], index: int) -> JobSpec:
    """Resolve with the micro-batch the plan chooses. `resolve_with` resolves the command line with its --set items
    replaced by the ones given (without `auto` in them); `sets[index]` is the `auto` item."""
    from hpclaunch.config.base import replace as with_fields

    others = tuple(item for i, item in enumerate(sets) if i != index)
    recipe_batch = resolve_with(others)  # the global batch the recipe (and the other flags) ask for
    global_batch, dp = recipe_batch.global_batch_size, recipe_batch.data_parallel
    per_replica = global_batch // dp
    choice = choose(recipe_batch, per_replica, sets[index])
    spec = resolve_with((*others, *_batch_sets(choice.micro_batch, per_replica, global_batch)))
    return with_fields(spec, sets=tuple(sets), micro_batch_auto=choice)


def choose(spec: JobSpec, per_replica: int, item: str) -> MicroBatchAuto:
    """The choice for `spec` (resolved at any micro-batch: each one tried replaces it and the accumulation);
    DoesNotFit when not even 1 fits, ConfigError when no plan can be made (no device memory given, a model the plan
    cannot build here)."""
    from hpclaunch.config.jobspec import MicroBatchAuto
    from hpclaunch.plan.job import limits_of, setup_of
    from hpclaunch.plan.memory import GIB, estimate, fits
    from hpclaunch.plan.model import model_facts

    limits = limits_of(spec)
    if limits.device_bytes is None:
        raise ConfigError(f"--set {item}: partition {spec.partition!r} of profile {spec.profile.name!r} does not "
                          "give gpu_memory_gb, so no micro-batch can be planned against it", key=KEY,
                          hint="give the micro-batch (--set train.micro_batch_size=N), or add gpu_memory_gb to the "
                               "partition in the profile")
    try:
        facts = model_facts(spec)
    except NoPlan as exc:
        raise ConfigError(f"--set {item}: the memory plan cannot be made: {exc.message}", key=KEY,
                          hint=exc.hint or "give the micro-batch (--set train.micro_batch_size=N)") from None
    margin = spec.profile.defaults.memory_margin
    capped = replace(limits, device_bytes=limits.device_bytes * (1 - margin))
    base = setup_of(spec, facts)

    def at(micro: int) -> tuple[bool, float]:
        setup = replace(base, micro_batch=micro, grad_accum=max(1, per_replica // micro))
        return fits(facts, setup, capped), estimate(facts, setup).total

    up_to = 0
    for micro in range(1, min(per_replica, MOST_SCANNED) + 1):
        if not at(micro)[0]:
            break
        up_to = micro
    limit_gib = capped.device_bytes / GIB if capped.device_bytes else 0.0
    if up_to == 0:
        raise DoesNotFit(
            f"--set {item}: not even micro-batch 1 fits: the plan needs {at(1)[1] / GIB:.1f} GiB per device on "
            f"{spec.layout} but the limit is {limit_gib:.1f} GiB ({limits.device_bytes / GIB:g} GiB of partition "
            f"{spec.partition!r} - {margin:.0%} margin, profile {spec.profile.name!r} defaults.memory_margin)",
            hint="more devices (--layout), activation checkpointing, a higher ZeRO stage or offload: "
                 "`hpclaunch plan` with --set train.micro_batch_size=1 lists what fits")
    chosen = max(d for d in range(1, up_to + 1) if per_replica % d == 0)
    return MicroBatchAuto(
        micro_batch=chosen, grad_accum=per_replica // chosen, fits_up_to=up_to, per_replica=per_replica,
        global_batch=spec.global_batch_size, margin=margin, limit_gib=round(limit_gib, 3),
        device_gib=round(limits.device_bytes / GIB, 3), per_device_gib=round(at(chosen)[1] / GIB, 3),
        next_gib=round(at(up_to + 1)[1] / GIB, 3))
