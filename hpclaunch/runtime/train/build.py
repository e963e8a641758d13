"""Tokenizer and model for a job: staged hub assets, or generated ones for the `tiny` presets.

Generated assets are deterministic (fixed seed, fixed corpus) and cached in the store, so every
launcher (torchrun/DDP, DeepSpeed ZeRO-1/2/3) starts from the very same weights.

Under ZeRO-3 the model is partitioned while it loads: transformers' `HfDeepSpeedConfig` (kept alive for
the job's life) makes `from_pretrained` build it inside `deepspeed.zero.Init` and load each rank's shard,
so no rank ever holds the whole model (Mixtral-8x7B is 93 GB in bf16). Each rank records what it holds
right after the load in its metrics (kind "model").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hpclaunch.config.overrides import apply_overrides, read_override, set_dropout
from hpclaunch.errors import ConfigError
from hpclaunch.runtime.train.assets import fingerprint, generated, hub_asset, job_store
from hpclaunch.runtime.train.generate_model import auto_class, build_in_child
from hpclaunch.runtime.train.held import is_sharded, local
from hpclaunch.runtime.train.metrics import MetricsWriter, full_numel
from hpclaunch.runtime.train.tokenizer import LazyTokenizer, tokenizer_path
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    import torch
    from transformers import (
        PreTrainedConfig,
        PreTrainedModel,
        PreTrainedTokenizerBase,
    )

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.recipe import ModelSpec
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.gpt2 import GPT2
    from hpclaunch.runtime.train.job import Job

def _model_spec(spec: JobSpec) -> ModelSpec:
    m = spec.recipe.model
    assert m is not None, f"recipe {spec.recipe.name} has no model section"
    return m


def model_config(spec: JobSpec, tokenizer: PreTrainedTokenizerBase) -> tuple[PreTrainedConfig, list[str]]:
    """The model config: generated from model_type + config, or the staged one; then the recipe's
    model.config keys, override_config.json and train.dropout, in that order."""
    from transformers import AutoConfig

    m = _model_spec(spec)
    if m.source == "generate":
        assert m.model_type is not None  # ModelSpec's validator: source generate needs a model_type
        ids = {k: getattr(tokenizer, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
        config = AutoConfig.for_model(
            m.model_type, vocab_size=len(tokenizer), **{k: v for k, v in ids.items() if v is not None}
        )
    else:
        assert m.repo is not None  # ModelSpec's validator: source hub needs a repo
        config = AutoConfig.from_pretrained(hub_asset(spec, "model", m.repo, m.revision))
    return config, recipe_changes(config, spec)


def recipe_changes(config: Any, spec: JobSpec) -> list[str]:
    """Apply the recipe's model.config keys, override_config.json and train.dropout to `config` (a transformers
    config or gpt2.Config), in that order; 'key: old -> new' lines for the log."""
    m = _model_spec(spec)
    changes = apply_overrides(config, dict(m.config), source=f"recipe {spec.recipe.name}: model.config")
    if m.override_config:
        path = Path(spec.recipe_dir) / m.override_config
        changes += apply_overrides(config, read_override(path), source=str(path))
    if spec.recipe.train.dropout is not None:
        set_dropout(config, spec.recipe.train.dropout)
    return changes


_CHANGES = "hpclaunch-config-changes.json"  # beside a generated model: the recipe's changes, for the log


def generated_model(spec: JobSpec, tokenizer_src: str, d: Dist,
                    config_of: Callable[[], tuple[PreTrainedConfig, list[str]]]) -> tuple[Path, list[str]]:
    """(the folder of the recipe's generated model, the recipe's config changes). Keyed by what the config is made
    of (model type, the recipe's keys, override file, dropout, the tokenizer, the seed), so finding it needs no
    transformers; built once per store by rank 0 with the config `config_of()` makes (a cold store only)."""
    m, seed = _model_spec(spec), spec.recipe.train.seed
    override = read_override(Path(spec.recipe_dir) / m.override_config) if m.override_config else None
    made_of = {"model_type": m.model_type, "config": dict(m.config), "override": override,
               "dropout": spec.recipe.train.dropout, "tokenizer": tokenizer_src}

    def build(out: Path) -> None:  # rank 0 alone, in a child: no DeepSpeed import here, no ZeRO-3 init there
        config, changes = config_of()
        build_in_child(config, spec.recipe.task, seed, out)
        (out / _CHANGES).write_text(json.dumps(changes))

    key = fingerprint("model", spec.recipe.task, made_of, seed, 2)  # 2: keyed by the inputs, not the config
    path = generated(job_store(spec), "models", key, build, d)
    return path, json.loads((path / _CHANGES).read_text())


_ZERO3: list[Any] = []  # the HfDeepSpeedConfig of this process: transformers holds only a weak reference


def zero3_at_load(deepspeed_config: Path | None) -> bool:
    """Under ZeRO-3 (stage 3 in the job's ds_config.json), make transformers partition the model while it
    loads (`deepspeed.zero.Init`), for the rest of the process's life. False for any other stage."""
    if deepspeed_config is None:
        return False
    config = json.loads(Path(deepspeed_config).read_text())
    if int(config.get("zero_optimization", {}).get("stage", 0)) != 3:
        return False
    if not _ZERO3:
        from transformers.integrations import HfDeepSpeedConfig

        _ZERO3.append(HfDeepSpeedConfig(config))
    return True


def load_model(spec: JobSpec, tokenizer: PreTrainedTokenizerBase, d: Dist, deepspeed_config: Path | None = None,
               tokenizer_src: str | None = None) -> tuple[PreTrainedModel, list[str]]:
    """(model in fp32, config changes). Weights: the staged checkpoint, or a random init with the job's
    seed built once by rank 0 and cached in the store. With a ZeRO-3 `deepspeed_config` the model comes
    back partitioned over the ranks (each holds its shard); otherwise whole, on the CPU."""
    import torch

    m = _model_spec(spec)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config, changes = model_config(spec, tokenizer)
    auto = auto_class(spec.recipe.task)
    if m.source == "generate":
        src = tokenizer_src or str(tokenizer_path(spec, d))
        path, _ = generated_model(spec, src, d, lambda: (config, changes))
    else:
        assert m.repo is not None  # ModelSpec's validator: source hub needs a repo
        path = hub_asset(spec, "model", m.repo, m.revision)
    zero3_at_load(deepspeed_config)
    if d.tensor_parallel > 1:  # each rank reads only its shards (hpclaunch/runtime/train/tensor_parallel.py)
        from hpclaunch.runtime.train.tensor_parallel import compact_shards, distributed_config

        model = auto.from_pretrained(path, config=config, dtype=torch.float32, distributed_config=distributed_config(d))
        compact_shards(model)
    else:
        model = auto.from_pretrained(path, config=config, dtype=torch.float32)
    if m.source != "generate":
        embeddings = cast(torch.Tensor, model.get_input_embeddings().weight)  # typed Tensor | Module by torch
        rows = getattr(embeddings, "ds_shape", embeddings.shape)[0]  # ZeRO-3: the full shape, not the shard's
        if len(tokenizer) > rows:
            model.resize_token_embeddings(len(tokenizer))
    # Name the loss: transformers finds it from the class name, which GPT2LMHeadModel does not carry, and
    # then warns "`loss_type=None` ... unrecognized" on every rank of every run.
    loss_type = "ForMaskedLM" if spec.recipe.task == "masked-lm" else "ForCausalLM"
    model.config.loss_type = loss_type
    if hasattr(model, "loss_type"):  # the model keeps its own copy, taken from the config at __init__
        model.loss_type = loss_type
    return model, changes


def held_bytes(model: torch.nn.Module) -> tuple[int, int, int]:
    """(parameters, bytes of parameters this rank holds, bytes of the whole model's parameters): under
    ZeRO-3 a rank holds its shard (`ds_tensor`), under tensor parallelism its DTensor shards, elsewhere
    the whole tensor."""
    count = held = total = 0
    for p in model.parameters():
        n = full_numel(p)
        count += n
        total += n * p.element_size()
        shard = getattr(p, "ds_tensor", None)
        mine = shard if shard is not None else local(p)
        held += mine.numel() * mine.element_size()
    return count, held, total


def sharded_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """Tensor parallel: (bytes of the weights split over the mesh, the bytes of them this rank holds)."""
    whole = mine = 0
    for p in model.parameters():
        if is_sharded(p):
            whole += p.numel() * p.element_size()
            mine += local(p).numel() * p.element_size()
    return whole, mine


def may_be_lean(spec: JobSpec, d: Dist, deepspeed_config: Path | None) -> bool:
    """Whether hpclaunch's torch-only GPT-2 (gpt2.py) may stand in for transformers' model, read off the spec alone
    (the config itself is checked once known: gpt2.unsupported). Not for another model or task, nor where
    transformers' own paths are needed: DeepSpeed's engine, activation checkpointing, a tensor-parallel plan."""
    m, t = _model_spec(spec), spec.recipe.train
    return (t.model_code == "auto" and spec.recipe.task == "causal-lm"
            and (m.source != "generate" or m.model_type == "gpt2")
            and deepspeed_config is None and not t.activation_checkpointing and d.tensor_parallel == 1)


def lean_model(spec: JobSpec, d: Dist, tokenizer: LazyTokenizer) -> tuple[GPT2, list[str]] | None:
    """(hpclaunch's GPT-2 with the job's weights, the config changes), or None where its config or weights are not
    ones it takes (then transformers' model is loaded)."""
    from hpclaunch.runtime.train import gpt2

    m = _model_spec(spec)
    if m.source == "generate":
        src = str(tokenizer.path)
        path, changes = generated_model(spec, src, d, lambda: model_config(spec, tokenizer.loaded()))
        config = gpt2.Config.from_pretrained(path)
    else:
        assert m.repo is not None  # ModelSpec's validator: source hub needs a repo
        path = hub_asset(spec, "model", m.repo, m.revision)
        config = gpt2.Config.from_pretrained(path)
        try:
            changes = recipe_changes(config, spec)
        except ConfigError:  # a key this config.json leaves out: transformers' config decides (load_model)
            return None
        if len(tokenizer) > config.vocab_size:  # transformers would resize the embeddings
            return None
    if gpt2.unsupported(config) is not None or not (path / gpt2.WEIGHTS).is_file():
        return None
    config.loss_type = "ForCausalLM"  # as load_model names it: the exported config.json loads without a warning
    return gpt2.GPT2.from_pretrained(path, config), changes


def load_tokenizer_and_model(
    j: Job, d: Dist, log: Callable[[str], None]
) -> tuple[PreTrainedTokenizerBase | LazyTokenizer, str, PreTrainedModel | GPT2]:
    """The tokenizer (and where it came from, which keys the data cache) and the model, logging the
    config changes made by overrides and the parameter count; each rank records in its metrics the
    parameter bytes it holds right after the load (ZeRO-3: its shard).

    A GPT-2 that hpclaunch's torch-only model can stand in for (may_be_lean, lean_model) keeps its tokenizer lazy:
    loaded only if a text is tokenized, so the rank imports neither transformers nor its torch parts."""
    lazy = LazyTokenizer(tokenizer_path(j.spec, d))
    tokenizer_src = str(lazy.path)
    lean = lean_model(j.spec, d, lazy) if may_be_lean(j.spec, d, j.deepspeed_config) else None
    tokenizer: PreTrainedTokenizerBase | LazyTokenizer
    model: PreTrainedModel | GPT2
    if lean is not None:
        tokenizer, (model, changes) = lazy, lean
        log(f"model code: {model.model_name}")
    else:
        tokenizer = lazy.loaded()
        model, changes = load_model(j.spec, tokenizer, d, j.deepspeed_config, tokenizer_src)
    for change in changes:
        log(f"config {change}")
    if d.is_main:  # what `hpclaunch export` needs besides the weights (config, tokenizer): a few kB
        folder = RunFiles(j.run_dir).model_files
        model.config.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    model.config.use_cache = False  # a training step builds no key/value cache (the saved config keeps it)
    count, held, total = held_bytes(model)
    extra: dict[str, int] = {}
    if d.tensor_parallel > 1:
        whole, mine = sharded_bytes(model)
        extra = {"tensor_parallel": d.tensor_parallel, "sharded_param_bytes": whole, "held_sharded_bytes": mine}
    MetricsWriter(j.run_dir, d.rank, trackers=False).write(
        "model", params=count, param_bytes=total, held_param_bytes=held, world_size=d.world_size, **extra)
    how = f"tensor parallel {d.tensor_parallel} x data parallel {d.dp_size}" if extra else "partitioned at load"
    shard = f", {how}: this rank holds {held / 2**20:.1f} of {total / 2**20:.1f} MiB"
    log(f"model: {count / 1e6:.2f}M parameters" + (shard if held < total else ""))
    timeline.mark("model_loaded")  # rank 0
    return tokenizer, tokenizer_src, model
