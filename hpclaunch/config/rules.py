"""The checks of the config models (hpclaunch/config/profile.py, recipe.py, tracking.py) beyond types and
bounds: value checks named in a field's metadata ("before"/"check", hpclaunch/config/base.py) and the checks
across fields that the models' `__post_init__` run. Each raises ValueError with the message the user sees.
Imports nothing heavy (no yaml at import time).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from hpclaunch.config.memsize import parse_size
from hpclaunch.config.walltime import parse_time
from hpclaunch.core.backends import SCHEDULERS, can

# Which collective backends make sense on which accelerator.
BACKENDS: dict[str, tuple[str, ...]] = {
    "cuda": ("nccl", "gloo"),
    "musa": ("mccl", "gloo"),
    "npu": ("hccl",),
    "cpu": ("gloo",),
}

# The variable that restricts which devices a process sees, per accelerator.
VISIBLE_DEVICES_VAR: dict[str, str | None] = {
    "cuda": "CUDA_VISIBLE_DEVICES",
    "musa": "MUSA_VISIBLE_DEVICES",
    "npu": "ASCEND_RT_VISIBLE_DEVICES",
    "cpu": None,
}


# Devices per node a vendor's runtime accepts, where it restricts them (Ascend: HCCL's rank tables and
# the 8-device boards take 1, 2, 4 or 8 per node; a 3-device node fails at initialisation).
DEVICES_PER_NODE: dict[str, tuple[int, ...]] = {"npu": (1, 2, 4, 8)}

# No node has more devices than this (8 is usual, 16 rare); a larger number is a typo (80 for 8) that would
# otherwise reach the scheduler and start that many ranks on one node.
MAX_DEVICES_PER_NODE = 64


class FieldError(ValueError):
    """A check across fields that blames one of them: the validation reports it at that field (`key`, dotted), so
    the place its value came from (a preset, a --set flag) is named rather than the model's top level."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


# --- value checks (raise ValueError with the message the user sees) --------------------------------


def one_of(values: Iterable[Any]) -> str:
    """The allowed values as the errors list them: 'a', 'b' or 'c'."""
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def scheduler_name(value: str) -> str:
    """A profile's scheduler: a name in the table of hpclaunch/core/backends.py as it is now (one line there
    registers a backend)."""
    if value not in SCHEDULERS:
        raise ValueError(f"Input should be {one_of(SCHEDULERS)}")
    return value


def minutes_as_text(value: object) -> object:
    # `time: 90` in YAML is the integer 90; for Slurm it means 90 minutes
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def slurm_time(value: str) -> str:
    parse_time(value)
    return value


def memory_size(value: object) -> object:
    """resources.mem_per_device: a Slurm memory size (64G, 4000M), its unit in capitals; a bare number counts MiB,
    as Slurm reads it."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        parse_size(value)
        return value.strip().upper()
    return value


def devices_per_node(value: int) -> int:
    if value > MAX_DEVICES_PER_NODE:
        raise ValueError(f"{value} devices per node is more than any node has (at most {MAX_DEVICES_PER_NODE}; "
                         "8 is usual): a typo?")
    return value


# W&B refuses these characters in project, entity and group names
_WANDB_NAME = re.compile(r"^[^/\\#?%:\s][^/\\#?%:]{0,127}$")


def wandb_name(value: str | None) -> str | None:
    """tracking.wandb.project / entity / group."""
    if value is not None and not _WANDB_NAME.match(value):
        raise ValueError(f"{value!r} is not a W&B name: 1-128 characters, none of / \\ # ? % : and no leading "
                         "space")
    return value


def wandb_tags(value: tuple[str, ...]) -> tuple[str, ...]:
    for tag in value:
        if not 0 < len(tag) <= 64:
            raise ValueError(f"tag {tag!r}: W&B tags are 1-64 characters")
    return value


def env_strings(value: object) -> object:
    """Environment values: text, numbers and booleans become text; a list, a mapping or null is refused
    (its Python spelling would reach the job's environment)."""
    if isinstance(value, dict):
        for k, val in value.items():
            if val is None or isinstance(val, list | dict | tuple):
                shown = "null" if val is None else type(val).__name__
                raise ValueError(f"the value of {k!r} is a {shown}; an environment variable holds text: "
                                 "write it as a quoted string")
        return {str(k): str(val) for k, val in value.items()}
    return value


def one_python_env(env: Any) -> None:
    if env.conda_env and env.venv:
        raise ValueError("set either conda_env or venv, not both")


# Image references Apptainer pulls or converts itself (anything else is a path to an image file).
APPTAINER_URI = re.compile(r"^(?:docker|library|oras|shub|http|https|docker-archive|docker-daemon|oci|oci-archive)://?")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_IMAGE_EXAMPLES = {"apptainer": "/shared/images/pytorch.sif or docker://nvcr.io/nvidia/pytorch:24.01-py3",
                   "pyxis": "nvcr.io#nvidia/pytorch:24.01-py3", "charliecloud": "/shared/images/train.sqfs"}


def _container_path(text: str) -> bool:
    return text.startswith("/") or text.startswith("~/")


def container_config(c: Any) -> None:
    """The profile's `container:` section (docs/containers.md)."""
    if c.runtime == "none":
        given = [k for k in ("image", "mounts", "env", "stage_dir") if getattr(c, k)]
        if given:
            raise ValueError(f"{', '.join(given)} given but runtime is none: set runtime: apptainer, pyxis or "
                             "charliecloud (or remove the container section)")
        return
    if not c.image or not c.image.strip():
        raise ValueError(f"runtime {c.runtime} needs an image, e.g. " + _IMAGE_EXAMPLES[c.runtime])
    if c.stage_dir is not None and (c.runtime != "charliecloud" or not _container_path(c.stage_dir)):
        raise ValueError(f"stage_dir {c.stage_dir!r}: only runtime charliecloud unpacks its image, into an absolute "
                         "folder (/local/scratch, ~/...)")
    if c.runtime == "charliecloud" and not _container_path(c.image):
        raise ValueError(f"image {c.image!r} is not an absolute path to a SquashFS file or an image directory "
                         "(/shared/images/train.sqfs): ch-run would look for it relative to where the job starts")
    if any(ch in c.image for ch in "\n\r"):
        raise ValueError(f"image {c.image!r} holds a line break")
    if c.runtime == "apptainer" and not APPTAINER_URI.match(c.image) and not _container_path(c.image):
        raise ValueError(f"image {c.image!r} is neither an absolute path to an image file (/shared/x.sif, ~/x.sif) "
                         "nor an image URI (docker://..., oras://..., library://...): Apptainer would look for it "
                         "relative to where the job starts")
    if c.runtime == "pyxis" and "," in c.image:
        raise ValueError(f"image {c.image!r} holds a comma, which pyxis cannot take")
    for mount in c.mounts:
        container_mount(mount)
    for name in c.env:
        if not _ENV_NAME.match(name):
            raise ValueError(f"env: {name!r} is not a valid environment variable name")


def container_mount(mount: str) -> None:
    """`SRC[:DST[:ro|rw]]`, SRC and DST absolute (SRC may start with ~/), no comma (it separates mounts)."""
    parts = mount.split(":")
    if "," in mount or any(ch in mount for ch in "\n\r") or len(parts) > 3 or not _container_path(parts[0]) \
            or (len(parts) > 1 and not parts[1].startswith("/")) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise ValueError(f"mount {mount!r} is not SRC[:DST[:ro|rw]] with absolute paths (SRC may start with ~/) "
                         "and no comma, e.g. /scratch or /scratch/data:/data:ro")


def consistent_profile(p: Any) -> None:
    if p.backend not in BACKENDS[p.accelerator]:
        raise ValueError(f"backend {p.backend!r} does not run on accelerator {p.accelerator!r}; "
                         f"use one of: {', '.join(BACKENDS[p.accelerator])}")
    if p.default_partition not in p.partitions:
        raise ValueError(f"default_partition {p.default_partition!r} is not one of the partitions: "
                         f"{', '.join(sorted(p.partitions))}")
    if not can(p.scheduler, "multi_node") and any(part.max_nodes > 1 for part in p.partitions.values()):
        raise ValueError(f"a {p.scheduler} profile runs on one node: set max_nodes: 1")
    if p.container.runtime == "pyxis" and not can(p.scheduler, "srun"):
        raise ValueError("container.runtime: pyxis is a Slurm plugin (srun --container-image), and this profile's "
                         f"scheduler is {p.scheduler} (no srun): use runtime: apptainer, or a scheduler with srun "
                         f"({', '.join(n for n in SCHEDULERS if can(n, 'srun'))})")


def model_source(m: Any) -> None:
    if m.source == "hub" and not m.repo:
        raise ValueError("source: hub needs a repo")
    if m.source == "generate" and not m.model_type:
        raise ValueError("source: generate needs a model_type")


def dataset_source(d: Any) -> None:
    if d.source == "hub" and not d.repo:
        raise ValueError("source: hub needs a repo")
    if d.source == "builtin" and not d.corpus:
        raise ValueError("source: builtin needs a corpus")


def launcher_sections(r: Any) -> None:
    if r.launchers and r.launcher not in r.launchers:
        raise FieldError("launcher", f"recipe {r.name}'s script runs under {' or '.join(r.launchers)} (launchers in "
                         f"its recipe.yaml), not {r.launcher}: choose one of those, or a recipe written for "
                         f"{r.launcher} (`hpclaunch recipes list`)")
    if r.launch.agent == "none" and r.launcher != "torchrun":
        raise ValueError(f"launch.agent: none needs launcher: torchrun (launcher is {r.launcher}); "
                         "leave launch.agent at auto (the launcher starts its ranks itself)")
    if r.deepspeed is not None and r.launcher != "deepspeed":
        raise ValueError(f"a deepspeed section needs launcher: deepspeed (launcher is {r.launcher})")
    if r.msrun is not None and r.launcher != "msrun":
        raise ValueError(f"an msrun section needs launcher: msrun (launcher is {r.launcher})")
    if r.parallel is not None and r.launcher == "deepspeed":
        raise ValueError("a parallel section (data/model/pipeline parallel) needs launcher msrun (MindSpore) or "
                         "torchrun (tensor parallel); DeepSpeed shards with ZeRO and would ignore it: remove the "
                         "section, or use launcher torchrun for tensor parallelism")
    if r.parallel is not None and r.launcher == "torchrun":
        torch_parallel(r.parallel)
    if r.deepspeed is not None:
        ignored = sorted(set(r.deepspeed.config) & DS_CLIENT_KEYS)
        if ignored:
            raise ValueError(f"deepspeed.config: {', '.join(ignored)}: the recipes pass DeepSpeed their own AdamW "
                             "and learning-rate schedule, which take precedence, so these keys would be ignored; "
                             "set train.lr, train.weight_decay, train.adam_betas, train.warmup_steps instead")
        checkpoint = r.deepspeed.config.get("checkpoint")
        if isinstance(checkpoint, dict) and checkpoint.get("writer") is not None:
            raise ValueError("deepspeed.config: checkpoint.writer: DeepSpeed's fast and decoupled writers read "
                             "CROSS_RANK/CROSS_SIZE, which only DeepSpeed's own launcher sets (the ranks here would "
                             "fail at start with KeyError 'CROSS_SIZE'), and the decoupled one keeps the ranks from "
                             "exiting; the recipes write DeepSpeed checkpoints in the background themselves "
                             "(docs/recipes.md#checkpoints): remove checkpoint.writer")


def zero_offload(ds: Any) -> None:
    """Parameter offload is a ZeRO-3 feature: under stages 0-2 DeepSpeed reads no offload_param and keeps the
    parameters on the device (the ds_config.json would hold it all the same)."""
    raw = ds.config.get("zero_optimization")
    raw = raw if isinstance(raw, dict) else {}
    stage = raw.get("stage", ds.zero_stage)
    if (ds.offload_param or raw.get("offload_param")) and stage != 3:
        where = "deepspeed.offload_param" if ds.offload_param else "deepspeed.config.zero_optimization.offload_param"
        origin = "deepspeed.zero_stage" if "stage" not in raw else "deepspeed.config.zero_optimization.stage"
        raise ValueError(f"{where}: parameter offload is a ZeRO-3 feature, and {origin} is {stage}: DeepSpeed would "
                         "ignore it and keep the parameters on the device; set deepspeed.zero_stage=3 with it, or "
                         "deepspeed.offload_optimizer=true (the optimizer states, ZeRO-1/2/3) instead")


# MindSpore's parallel keys that the torch recipes have no counterpart for
MINDSPORE_ONLY = ("micro_batch_num", "optimizer_shard", "recompute", "vocab_emb_dp")


def torch_parallel(par: Any) -> None:
    """A torch recipe's parallel section: tensor x data parallel only (hpclaunch/runtime/train/tensor_parallel.py)."""
    if par.pipeline_stage > 1:
        raise ValueError(f"parallel.pipeline_stage={par.pipeline_stage}: the torch recipes implement tensor and "
                         "data parallelism, not pipeline stages; set pipeline_stage=1 and use model_parallel")
    defaults = type(par)()
    set_keys = [f"{k}={getattr(par, k)}" for k in MINDSPORE_ONLY if getattr(par, k) != getattr(defaults, k)]
    if set_keys:
        raise ValueError(f"parallel: {', '.join(set_keys)} are MindSpore settings (launcher msrun) that torchrun "
                         "would ignore: remove them (train.activation_checkpointing is the torch recompute)")


# ds_config keys a client optimizer / scheduler overrides (deepspeed.initialize(optimizer=, lr_scheduler=))
DS_CLIENT_KEYS = frozenset({"optimizer", "scheduler"})


# --- notify: (hpclaunch/config/notify.py) -----------------------------------------------------------------------


def word_list(value: object) -> object:
    """A list as it is; a text as its comma-separated words (`END,FAIL`, `failed`)."""
    if isinstance(value, str):
        return tuple(word.strip() for word in value.split(",") if word.strip())
    return value


def some(value: tuple[Any, ...]) -> tuple[Any, ...]:
    if not value:
        raise ValueError("empty: give at least one")
    return value


def not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("blank")
    return value


def one_line(value: str) -> str:
    if not value.strip() or "\n" in value or "\r" in value:
        raise ValueError("blank, or holds a line break: give one line")
    return value


def webhook_url(value: str) -> str:
    """notify.webhook: http(s)://HOST[:PORT][/PATH], as urllib sends it."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError("not an http:// or https:// URL with a host: give e.g. https://hooks.example.org/hpclaunch or "
                         "http://127.0.0.1:8080/hook")
    return value
