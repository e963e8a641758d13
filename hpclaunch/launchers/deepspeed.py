"""DeepSpeed without passwordless ssh: ranks are started by torchrun on every node (the scheduler's step
runs one task per node) and the script calls deepspeed.init_distributed() (which reads torchrun's
environment). The launcher writes ds_config.json, batch sizes taken from the resolved job spec so they
always agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.precision import precision_for
from hpclaunch.launchers.base import Launcher, Word
from hpclaunch.launchers.torchrun import torchrun_words
from hpclaunch.state.runfiles import DS_CONFIG, RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def ds_config(spec: JobSpec) -> dict[str, Any]:
    ds = spec.deepspeed
    train = spec.recipe.train
    precision = precision_for(spec)
    stage = spec.zero_stage  # 0 on a single rank (JobSpec.zero_stage)
    zero: dict[str, Any] = {"stage": stage}
    if stage >= 2:
        zero.update(overlap_comm=True, contiguous_gradients=True)
    if stage == 3:
        zero.update(stage3_gather_16bit_weights_on_model_save=True)
    if ds.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": spec.profile.accelerator != "cpu"}
    if ds.offload_param:
        zero["offload_param"] = {"device": "cpu", "pin_memory": spec.profile.accelerator != "cpu"}
    config: dict[str, Any] = {
        "train_batch_size": spec.global_batch_size,
        "train_micro_batch_size_per_gpu": train.micro_batch_size,
        "gradient_accumulation_steps": spec.grad_accum,
        "zero_optimization": zero,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16", "initial_scale_power": 16},
        "steps_per_print": max(train.max_steps, 1_000_000),
        "wall_clock_breakdown": False,
        # The client (fused torch) AdamW is used; this lets it run with ZeRO offload too.
        "zero_force_ds_cpu_optimizer": False,
    }
    if train.grad_clip is not None:
        config["gradient_clipping"] = train.grad_clip
    return _merge(config, ds.config)


class DeepSpeedLauncher(Launcher):
    name = "deepspeed"

    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        return [*torchrun_words(spec), str(spec.script_path),
                *self.script_args(spec, run_dir, "--deepspeed_config", str(RunFiles(run_dir).ds_config))]

    def files(self, spec: JobSpec) -> dict[str, str]:
        return {DS_CONFIG: json.dumps(ds_config(spec), indent=2, sort_keys=True) + "\n"}
