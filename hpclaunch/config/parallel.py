"""MindSpore's parallel config (seed 004) checked against the layout and the model, before queueing.

data_parallel x model_parallel x pipeline_stage must equal the device count; with pipeline stages,
micro_batch_num must keep every stage busy; model_parallel must split the attention heads and
pipeline_stage the layers. Every message carries the numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.config.recipe import ParallelSpec


def data_parallel_degree(par: ParallelSpec, world_size: int,
                         model_config: dict[str, Any] | None = None) -> int:
    """The data-parallel size of `par` on `world_size` devices; ConfigError when they do not fit."""
    mp, pp = par.model_parallel, par.pipeline_stage
    mp_pp = mp * pp
    if par.data_parallel is None:
        if world_size % mp_pp:
            raise ConfigError(
                f"model_parallel({mp}) x pipeline_stage({pp}) = {mp_pp} devices per model replica, but the "
                f"layout has {world_size} devices, which is not a multiple of {mp_pp}", key="parallel",
                hint=f"use a layout with a multiple of {mp_pp} devices, or lower parallel.model_parallel / "
                     "parallel.pipeline_stage")
        dp = world_size // mp_pp
    else:
        dp = par.data_parallel
        if dp * mp_pp != world_size:
            raise ConfigError(
                f"data_parallel({dp}) x model_parallel({mp}) x pipeline_stage({pp}) = {dp * mp_pp}, but the "
                f"layout has {world_size} devices", key="parallel",
                hint="make the product equal the device count (nodes x GPUs per node), or drop "
                     "parallel.data_parallel and it is derived")
    if pp > 1 and par.micro_batch_num < pp:
        raise ConfigError(f"micro_batch_num({par.micro_batch_num}) must be at least "
                          f"pipeline_stage({pp}) to keep every stage busy", key="parallel.micro_batch_num",
                          hint=f"set parallel.micro_batch_num to {pp} or more")
    mc = model_config or {}
    heads, layers = mc.get("num_attention_heads"), mc.get("num_layers")
    if isinstance(heads, int) and heads % mp:
        raise ConfigError(f"model_parallel({mp}) does not divide num_attention_heads({heads})",
                          key="parallel.model_parallel",
                          hint="choose a model_parallel that divides the heads")
    groups = mc.get("num_query_groups") if mc.get("group_query_attention") else None
    if isinstance(groups, int) and groups % mp:
        raise ConfigError(f"model_parallel({mp}) does not divide num_query_groups({groups})",
                          key="parallel.model_parallel",
                          hint="choose a model_parallel that divides the groups")
    kv = mc.get("num_key_value_heads")  # transformers' name (Llama, Mistral, Mixtral: grouped-query attention)
    if isinstance(kv, int) and kv % mp:
        raise ConfigError(f"model_parallel({mp}) does not divide num_key_value_heads({kv})",
                          key="parallel.model_parallel",
                          hint="choose a model_parallel that divides the key/value heads")
    if isinstance(layers, int) and layers < pp:
        raise ConfigError(f"pipeline_stage({pp}) is more than num_layers({layers}): a stage would be empty",
                          key="parallel.pipeline_stage", hint=f"use at most {layers} pipeline stages")
    return dp
