"""What recipes/gpt_mindspore's script honours: a recipe key it would accept and then not act on is refused here,
before queueing, with the key and what to set instead.

The script (recipes/gpt_mindspore/train.py) reads train.micro_batch_size, the job's grad_accum and
global_batch_size, seq_len, the AdamW and schedule keys, grad_clip, dropout, seed, log_every, eval_every,
eval_steps, save_every and train.precision (the compute dtype: fp32 on MindSpore's CPU backend, which has no
bfloat16 kernels and overflows its float16 attention mask); model.config's shape keys, compute_dtype,
params_dtype (float32 only), position_embedding_type (absolute only) and untie_embeddings_and_output_weights;
parallel.recompute (GPU and Ascend) and data parallelism. The rest is refused when set to anything but its
default. (model_parallel, pipeline_stage and optimizer_shard are refused by resolve's parallel.implemented check.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.config.recipe import Recipe

MODEL_TYPE = "gpt_mindspore"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def compute_dtype(precision: str, config_dtype: str | None, accelerator: str) -> str:
    """The dtype the script computes in (the same rule as the script's): train.precision's, and for `auto`
    model.config.compute_dtype, else bfloat16 on a device and float32 on the CPU."""
    if precision != "auto":
        return DTYPES[precision]
    return config_dtype or ("float32" if accelerator == "cpu" else "bfloat16")


def _refuse(recipe: Recipe, key: str, value: Any, why: str, fix: str, origin: Callable[[str], str]) -> ConfigError:
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return ConfigError(f"{shown} ({origin(key)}): recipe {recipe.name}'s script {why}", key=key, hint=fix)


def check(recipe: Recipe, accelerator: str, origin: Callable[[str], str]) -> None:
    """Refuse what the script would ignore; `origin(key)` says where a value came from (--set or the recipe)."""
    m, t, par = recipe.model, recipe.train, recipe.parallel
    if recipe.launcher != "msrun" or m is None or m.model_type != MODEL_TYPE:
        return
    mc = dict(m.config)
    if t.compile:
        raise _refuse(recipe, "train.compile", True, "runs in MindSpore's PyNative mode and compiles nothing "
                      "(graph mode is MindFormers')", "set train.compile=false", origin)
    pos = mc.get("position_embedding_type", "absolute")
    if pos != "absolute":
        raise _refuse(recipe, "model.config.position_embedding_type", pos, "implements learned absolute position "
                      "embeddings only (no rope)", "set model.config.position_embedding_type=absolute", origin)
    untie = mc.get("untie_embeddings_and_output_weights", True)
    if not isinstance(untie, bool):
        raise _refuse(recipe, "model.config.untie_embeddings_and_output_weights", untie, "reads true or false",
                      "set it to true (a separate LM head) or false (the head shares the token embedding)", origin)
    if par is not None and not par.vocab_emb_dp:
        raise _refuse(recipe, "parallel.vocab_emb_dp", False, "trains data parallel only, so the vocabulary "
                      "embedding is data parallel; sharding it needs model parallelism",
                      "set parallel.vocab_emb_dp=true", origin)
    _check_dtypes(recipe, mc, accelerator, origin)


def _check_dtypes(recipe: Recipe, mc: dict[str, Any], accelerator: str, origin: Callable[[str], str]) -> None:
    params = mc.get("params_dtype", "float32")
    if params != "float32":
        raise _refuse(recipe, "model.config.params_dtype", params, "keeps float32 parameters (mixed precision "
                      "casts the computation only, train.precision)", "set model.config.params_dtype=float32",
                      origin)
    precision, config_dtype = recipe.train.precision, mc.get("compute_dtype")
    if config_dtype is not None and config_dtype not in DTYPES.values():
        raise _refuse(recipe, "model.config.compute_dtype", config_dtype, "computes in float32, bfloat16 or float16",
                      "set train.precision (fp32, bf16, fp16) and leave out model.config.compute_dtype", origin)
    if precision != "auto" and config_dtype is not None and config_dtype != DTYPES[precision]:
        raise _refuse(recipe, "model.config.compute_dtype", config_dtype, f"computes in train.precision's dtype "
                      f"({precision}: {DTYPES[precision]}), and the two disagree",
                      f"set model.config.compute_dtype={DTYPES[precision]}, or train.precision=auto to use "
                      f"{config_dtype}", origin)
    dtype = compute_dtype(precision, config_dtype, accelerator)
    if accelerator == "cpu" and dtype != "float32":
        key, value = ("train.precision", precision) if precision != "auto" else ("model.config.compute_dtype", dtype)
        raise _refuse(recipe, key, value, "runs on MindSpore's CPU backend with this profile, which has no "
                      "bfloat16 kernels and whose float16 training overflows", "set train.precision=fp32 (or auto "
                      "without model.config.compute_dtype)", origin)
