"""Which models train through hpclaunch's own training forward (hpclaunch/runtime/train/fastpath.py): read by
the runtime, which installs it, and by the memory plan, which counts the activations it keeps."""

from __future__ import annotations

# (model_type, recipe task) -> the transformers class whose forward is replaced, and the share of the tokens
# whose vocabulary logits it computes (masked LM: the masked tokens only)
TRAINING_FORWARDS: dict[tuple[str, str], str] = {
    ("gpt2", "causal-lm"): "GPT2LMHeadModel",
    ("bert", "masked-lm"): "BertForMaskedLM",
}


def has_training_forward(model_type: str, task: str, *, checkpointing: bool, tensor_parallel: int) -> bool:
    """Whether a model of this type and task trains through the training forward: not with activation
    checkpointing or tensor-parallel shards (those keep the transformers forward and its paths)."""
    return (model_type, task) in TRAINING_FORWARDS and not checkpointing and tensor_parallel == 1
