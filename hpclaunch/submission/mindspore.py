"""What recipes/gpt_mindspore's script honours: a recipe key it would accept and then not act on is refused here,
before queueing, with the key, where it was set and what to set instead.

Which keys: the script declares the train and model.config keys it reads (its module-level ``READS``, read here
from its source without importing it; tests/unit/test_mindspore_reads.py checks the declaration against the keys
its code reads). A train.* or model.config key given by the recipe file, its preset or --set that is not among
them is refused (train's defaults are not "given": a resolved.yaml holds them all). Of the keys it reads, values
it would not honour are refused too: train.precision (the compute dtype: fp32 on MindSpore's CPU backend, which
has no bfloat16 kernels and overflows its float16 attention mask), model.config's params_dtype (float32 only),
position_embedding_type (absolute only), untie_embeddings_and_output_weights (true or false), compute_dtype, and
parallel.vocab_emb_dp false (it needs model parallelism). (model_parallel, pipeline_stage and optimizer_shard are
refused by resolve's parallel.implemented check.)
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.config.recipe import Recipe

MODEL_TYPE = "gpt_mindspore"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
SECTIONS = (("train",), ("model", "config"))  # the recipe sections whose keys the script declares it reads
DECLARATION = "READS"
# what a MindSpore script does instead of a torch recipe's key it does not read
INSTEAD = {"train.activation_checkpointing": "set parallel.recompute=true instead (it recomputes on GPU and Ascend)",
           "train.compile": "the script runs in MindSpore's PyNative mode, which compiles nothing (graph mode is "
                            "MindFormers')"}
# (where a layer of recipe values comes from, its values): the recipe file, its preset, each --set, lowest first
Layers = Sequence[tuple[str, Mapping[str, Any]]]


def compute_dtype(precision: str, config_dtype: str | None, accelerator: str) -> str:
    """The dtype the script computes in (the same rule as the script's): train.precision's, and for `auto`
    model.config.compute_dtype, else bfloat16 on a device and float32 on the CPU."""
    if precision != "auto":
        return DTYPES[precision]
    return config_dtype or ("float32" if accelerator == "cpu" else "bfloat16")


def _refuse(recipe: Recipe, key: str, value: Any, why: str, fix: str, origin: Callable[[str], str]) -> ConfigError:
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return ConfigError(f"{shown} ({origin(key)}): recipe {recipe.name}'s script {why}", key=key, hint=fix)


def check(recipe: Recipe, accelerator: str, origin: Callable[[str], str], script: Path | None = None,
          layers: Layers = ()) -> None:
    """Refuse what the script would ignore; `origin(key)` says where a value came from (--set or the recipe);
    `script` and `layers`: the script whose READS declaration says which keys it reads, and where the keys were
    given (see the module's docstring)."""
    m, par = recipe.model, recipe.parallel
    if recipe.launcher != "msrun" or m is None or m.model_type != MODEL_TYPE:
        return
    if script is not None:
        check_reads(recipe.name, script, layers)
    mc = dict(m.config)
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


def declared_reads(script: Path) -> dict[str, tuple[str, ...]] | None:
    """The script's READS declaration ({"train": keys, "model.config": keys}, a literal assigned at its top level),
    read from its source; None when it declares none (or is not there: submit's check of the script says so)."""
    try:
        text = script.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        tree = ast.parse(text, filename=str(script))
    except (SyntaxError, ValueError) as exc:
        raise ConfigError(f"cannot read the script to see which keys it reads: {exc}", file=str(script),
                          hint="fix the script (it would fail in the job too)") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == DECLARATION for t in node.targets):
            try:
                found = ast.literal_eval(node.value)
            except ValueError:
                found = None
            if not isinstance(found, dict) or not all(isinstance(v, (tuple, list)) for v in found.values()):
                raise ConfigError(f"{DECLARATION} (line {node.lineno}) must be a literal mapping of section to key "
                                  "names", file=str(script), hint='e.g. READS = {"train": ("lr", ...), '
                                                                  '"model.config": ("hidden_size", ...)}')
            return {str(k): tuple(map(str, v)) for k, v in found.items()}
    return None


def given_keys(layers: Layers, section: tuple[str, ...]) -> dict[str, str]:
    """The keys of `section` that `layers` give, each with the last layer that gives it."""
    found: dict[str, str] = {}
    for where, data in layers:
        values: Any = data
        for part in section:
            values = values.get(part) if isinstance(values, Mapping) else None
        if isinstance(values, Mapping):
            found.update({str(key): where for key in values})
    return found


def check_reads(name: str, script: Path, layers: Layers) -> None:
    """Refuse the train.* and model.config keys the layers give that the script does not declare it reads."""
    reads = declared_reads(script)
    if reads is None:
        return
    unread = []
    for section in SECTIONS:
        dotted = ".".join(section)
        known = reads.get(dotted, ())
        unread += [(f"{dotted}.{key}", where) for key, where in given_keys(layers, section).items() if key not in known]
    if not unread:
        return
    one = len(unread) == 1
    instead = "; ".join(f"{key}: {INSTEAD[key]}" for key, _ in unread if key in INSTEAD)
    said = "; ".join(f"{'.'.join(sec)}: {', '.join(reads.get('.'.join(sec), ())) or '(none)'}" for sec in SECTIONS)
    raise ConfigError(f"{', '.join(f'{key} ({where})' for key, where in unread)}: recipe {name}'s script "
                      f"{script.name} never reads {'this key' if one else 'these keys'}: "
                      f"{'it' if one else 'they'} would have no effect",
                      hint=f"leave {'it' if one else 'them'} out{f' ({instead})' if instead else ''}. The keys it "
                           f"reads ({DECLARATION} in "
                           f"{script}): {said}")
