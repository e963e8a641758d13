"""The facts of recipes/gpt_mindspore's GPT for the memory plan, by arithmetic on its config (no MindSpore
import: the plan runs on a login node without it). The model is the script's own (build_model in
recipes/gpt_mindspore/train.py): per block two LayerNorms, a fused QKV projection (grouped-query when
`group_query_attention`), the output projection and a GELU MLP, all with biases; token and position
embeddings, a final LayerNorm and an untied LM head without bias. Its attention is computed explicitly
(scores, mask, softmax), so the s x s score tensors are kept for backward.
"""

from __future__ import annotations

from typing import Any

from hpclaunch.errors import NoPlan
from hpclaunch.plan.memory import ModelFacts

MODEL_TYPE = "gpt_mindspore"


def gpt_facts(config: dict[str, Any], seq_len: int, *, source: str) -> ModelFacts:
    try:
        h, heads, layers = int(config["hidden_size"]), int(config["num_attention_heads"]), int(config["num_layers"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NoPlan(f"{source}: model.config needs hidden_size, num_attention_heads and num_layers ({exc})") from None
    groups = int(config.get("num_query_groups") or heads) if config.get("group_query_attention") else heads
    hd, vocab = h // heads, int(config.get("vocab_size", 256))
    ffn, positions = int(config.get("ffn_hidden_size") or 4 * h), int(config.get("seq_length") or seq_len)
    qkv = (heads + 2 * groups) * hd
    block = 2 * 2 * h + (h * qkv + qkv) + (h * h + h) + (h * ffn + ffn) + (ffn * h + h)
    embeddings = vocab * h + positions * h
    params = layers * block + embeddings + 2 * h + h * vocab
    return ModelFacts(params=params, layers=layers, hidden=h, heads=heads, kv_heads=groups, intermediate=ffn,
                      vocab=vocab, largest_block=max(block, vocab * h), model_type=MODEL_TYPE,
                      attention_scores=True)
