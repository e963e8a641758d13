"""Which floating-point precision a job trains in when the recipe says `auto`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpclaunch.config.profile import Partition

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

# GPUs that have fp16 tensor cores but no bf16.
_NO_BF16 = ("V100", "T4", "P100", "P40", "K80", "TITAN V")


def auto_precision(accelerator: str, partition: Partition) -> str:
    if accelerator == "cpu":
        return "fp32"
    gpu = (partition.gpu_type or "").upper()
    if accelerator == "cuda" and any(name in gpu for name in _NO_BF16):
        return "fp16"
    return "bf16"


def precision_for(spec: JobSpec) -> str:  # (JobSpec imported for type checking only: no import at run time)
    chosen = spec.recipe.train.precision
    if chosen != "auto":
        return chosen
    return auto_precision(spec.profile.accelerator, spec.partition_spec)
