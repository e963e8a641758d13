"""`hpclaunch export`: a run's checkpoint as a plain Hugging Face model folder that `from_pretrained` loads.

DeepSpeed checkpoints of ZeRO stages 1-3 (also ZeRO-3's per-rank shards) are consolidated into fp32 weights
with DeepSpeed's own `zero_to_fp32`; stage 0's (one device) and a DDP checkpoint hold the whole model already.
The weights are written as sharded safetensors (`huggingface_hub.save_torch_state_dict`, tied weights stored
once, under the input embedding's name as transformers' own save_pretrained does) next to the config and
tokenizer files the job saved in RUN_DIR/model/. Runs on a login node's CPU: it needs the memory of the model in
fp32 (4 bytes per parameter), nothing else.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.errors import ConfigError, HpclaunchError, NotFoundError
from hpclaunch.state.runfiles import CHECKPOINT_PREFIX, RunFiles

if TYPE_CHECKING:
    import torch

_STEP = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")


@dataclass(frozen=True)
class Exported:
    folder: Path
    checkpoint: Path
    step: int
    tensors: int
    params: int


def checkpoint(run_dir: Path, step: int | None = None) -> tuple[Path, int]:
    """The run's newest checkpoint, or the one of `step`."""
    root = RunFiles(run_dir).checkpoints
    found = {int(m.group(1)): p for p in (root.iterdir() if root.is_dir() else [])
             if p.is_dir() and (m := _STEP.match(p.name))}
    if not found:
        raise NotFoundError("checkpoint", str(root), hint="the job has saved no checkpoint yet "
                            "(train.save_every, or the end of the run)")
    if step is None:
        step = max(found)
    if step not in found:
        raise ConfigError(f"no checkpoint of step {step} in {root}",
                          hint=f"the run has checkpoints of steps {', '.join(map(str, sorted(found)))}")
    return found[step], step


def state_dict(ckpt: Path) -> dict[str, torch.Tensor]:
    """The whole model's weights (fp32 for DeepSpeed checkpoints) from one checkpoint folder."""
    import torch

    if (ckpt / "deepspeed").is_dir():
        if not any((ckpt / "deepspeed").glob("*_optim_states.pt")):
            return _unpartitioned(ckpt / "deepspeed")
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        return dict(get_fp32_state_dict_from_zero_checkpoint(str(ckpt), tag="deepspeed"))
    state = ckpt / "state.pt"
    if not state.is_file():
        raise HpclaunchError(f"{ckpt} holds neither a DeepSpeed checkpoint (deepspeed/) nor state.pt",
                             hint="only checkpoints written by hpclaunch's runtime can be exported")
    return dict(torch.load(state, map_location="cpu", weights_only=False)["model"])


def _unpartitioned(folder: Path) -> dict[str, torch.Tensor]:
    """A DeepSpeed checkpoint without ZeRO partitions (stage 0: one device, or `zero_stage: 0`): the whole module
    is in its model states file, as it trained (floating tensors as fp32); DeepSpeed's zero_to_fp32 has no
    partitions to gather there and fails on it."""
    import torch

    states = sorted(folder.glob("mp_rank_*_model_states.pt"))
    if len(states) != 1:
        raise HpclaunchError(f"{folder} holds {len(states)} model states files (mp_rank_*_model_states.pt), "
                             "not one", hint="only checkpoints written by hpclaunch's runtime can be exported")
    module = torch.load(states[0], map_location="cpu", weights_only=False)["module"]
    return {name: t.float() if t.is_floating_point() else t for name, t in module.items()}


def tied_copies(weights: dict[str, torch.Tensor]) -> list[str]:
    """The names of tensors that share memory with one earlier in the state dict (a tied output embedding such
    as `lm_head.weight`, registered after the input embedding it is tied to). Left out of the folder, the
    earlier name stays: huggingface_hub would keep the alphabetically first one (`lm_head.weight`), which
    transformers 4 does not tie back, leaving the input embedding unloaded."""
    seen: set[int] = set()
    later = []
    for name, tensor in weights.items():
        ptr = tensor.untyped_storage().data_ptr()
        if ptr and ptr in seen:
            later.append(name)
        seen.add(ptr)
    return later


def export(run_dir: Path, out: Path, step: int | None = None, max_shard_size: str = "5GB") -> Exported:
    """Write the checkpoint (newest, or of `step`) of `run_dir` as a Hugging Face folder `out` (which must
    not exist, or be empty). Written into a temporary folder beside `out`, renamed when complete."""
    files = RunFiles(run_dir)
    meta = files.model_files
    if not (meta / "config.json").is_file():
        raise NotFoundError("model config", str(meta / "config.json"),
                            hint="the job writes it when it loads the model; runs made before hpclaunch 0.2 "
                                 "and scripts without hpclaunch's runtime have none")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not an empty folder", hint="name a new folder with --out")
    ckpt, found_step = checkpoint(run_dir, step)
    weights = state_dict(ckpt)
    from huggingface_hub import save_torch_state_dict

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(meta, tmp)
        save_torch_state_dict(weights, tmp, max_shard_size=max_shard_size,
                              shared_tensors_to_discard=tied_copies(weights))
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    unique = {t.data_ptr(): t.numel() for t in weights.values()}
    return Exported(out, ckpt, found_step, len(weights), sum(unique.values()))
