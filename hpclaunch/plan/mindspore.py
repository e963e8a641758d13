"""The facts of recipes/gpt_mindspore's GPT for the memory plan, by arithmetic on its config (no MindSpore
import: the plan runs on a login node without it). The model is the script's own (build_model in
recipes/gpt_mindspore/train.py): per block two LayerNorms, a fused QKV projection (grouped-query when
`group_query_attention`), the output projection and a GELU MLP, all with biases; token and position
embeddings, a final LayerNorm and an LM head without bias (untied unless `untie_embeddings_and_output_weights` is
false: then the token embedding is the head). Its attention is computed explicitly (scores, mask, softmax), so
the s x s score tensors are kept for backward.
"""

from __future__ import annotations

from typing import Any

from hpclaunch.errors import NoPlan
from hpclaunch.plan.memory import ModelFacts

MODEL_TYPE = "gpt_mindspore"


_TYPE_NAMES = {int: "a whole number", str: "text", dict: "a mapping", list: "a list", bool: "true/false",
               float: "a decimal number", type(None): "null"}


def _whole(config: dict[str, Any], key: str, default: int | None, source: str) -> int:
    """model.config.KEY as a whole number of at least 1; a missing key takes `default` (None: required). A null
    is refused as the script reads it: `mc.get(key, default)` gives None, not the default."""
    if key not in config and default is not None:
        return default
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        what = "missing" if key not in config else f"{value!r} ({_TYPE_NAMES.get(type(value), type(value).__name__)})"
        raise NoPlan(f"{source}: model.config.{key} is {what}: the model needs a whole number of at least 1",
                     hint=f"set it with --set model.config.{key}=N (or in the recipe's model.config)")
    return value


def gpt_facts(config: dict[str, Any], seq_len: int, *, source: str) -> ModelFacts:
    """`config`: the recipe's model.config; every value read here is checked (NoPlan names the key and value)."""
    h = _whole(config, "hidden_size", None, source)
    heads = _whole(config, "num_attention_heads", None, source)
    layers = _whole(config, "num_layers", None, source)
    gqa = config.get("group_query_attention", False)
    if not isinstance(gqa, bool):
        raise NoPlan(f"{source}: model.config.group_query_attention is {gqa!r}: expected true or false")
    groups = _whole(config, "num_query_groups", None, source) if gqa else heads
    if h % heads:
        raise NoPlan(f"{source}: model.config: num_attention_heads({heads}) does not divide hidden_size({h})")
    if heads % groups:
        raise NoPlan(f"{source}: model.config: num_query_groups({groups}) does not divide "
                     f"num_attention_heads({heads})")
    hd, vocab = h // heads, _whole(config, "vocab_size", 256, source)
    ffn, positions = _whole(config, "ffn_hidden_size", 4 * h, source), _whole(config, "seq_length", seq_len, source)
    qkv = (heads + 2 * groups) * hd
    block = 2 * 2 * h + (h * qkv + qkv) + (h * h + h) + (h * ffn + ffn) + (ffn * h + h)
    embeddings = vocab * h + positions * h
    untie = config.get("untie_embeddings_and_output_weights", True)
    params = layers * block + embeddings + 2 * h + (h * vocab if untie is not False else 0)
    return ModelFacts(params=params, layers=layers, hidden=h, heads=heads, kv_heads=groups, intermediate=ffn,
                      vocab=vocab, largest_block=max(block, vocab * h), model_type=MODEL_TYPE,
                      attention_scores=True)
