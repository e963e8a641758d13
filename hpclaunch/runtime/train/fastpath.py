"""Training forwards that do only the work the loss needs, on the model's own modules and weights.

transformers' forwards are written for every use (caches, masks, attention outputs, logits over every token);
a training step needs the loss. `install(model, ...)` replaces the instance's `forward` (the class, its state
dict, checkpoints and `hpclaunch export` are unchanged) with:

    GPT2LMHeadModel   the blocks written out (nanoGPT's shape): one fused QKV projection, causal
                      scaled_dot_product_attention (FlashAttention on CUDA), no cache, no mask tensors;
                      GPT-2's own dropouts and GELU, the same loss (mean CE over the shifted tokens).
    BertForMaskedLM   the prediction head (transform + vocabulary decoder) on the masked positions only
                      (NVIDIA's BERT reference does the same): ~15 % of the tokens instead of all, and no
                      (batch, 512, vocabulary) logits; the positions come from the host (`masked`), so no sync.

Each returns an object with `.loss` (what the engines read). Held equal to the transformers forward in loss
and gradients by tests/unit/test_fastpath.py. Models with activation checkpointing or tensor-parallel shards
keep the transformers forward (its checkpointing and DTensor paths).
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F

from hpclaunch.config.forwards import TRAINING_FORWARDS, has_training_forward


class Output(types.SimpleNamespace):
    loss: torch.Tensor


def gpt2_train_forward(model: Any, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Output:
    """GPT2LMHeadModel's training forward on `model`'s modules (transformers' model, or hpclaunch's own in
    gpt2.py, which has the same modules): (input_ids, labels) -> Output(loss); no padding masks."""
    tr, cfg = model.transformer, model.config
    heads, width = cfg.n_head, cfg.n_embd
    b, t = input_ids.shape
    pos = torch.arange(t, device=input_ids.device)
    x = tr.drop(tr.wte(input_ids) + tr.wpe(pos))
    attn_p = cfg.attn_pdrop if model.training else 0.0
    for block in tr.h:
        q, k, v = block.attn.c_attn(block.ln_1(x)).split(width, dim=2)
        q, k, v = (z.view(b, t, heads, width // heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=attn_p, is_causal=True)
        x = x + block.attn.resid_dropout(block.attn.c_proj(y.transpose(1, 2).reshape(b, t, width)))
        x = x + block.mlp.dropout(block.mlp.c_proj(block.mlp.act(block.mlp.c_fc(block.ln_2(x)))))
    logits = model.lm_head(tr.ln_f(x))
    if labels is None:
        return Output(loss=None, logits=logits)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1),
                           ignore_index=-100)
    return Output(loss=loss)


def gpt2_forward(model: Any) -> Any:
    """GPT2LMHeadModel.forward for training: (input_ids, labels) -> Output(loss)."""

    def forward(input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Output:  # no padding masks
        return gpt2_train_forward(model, input_ids, labels)

    return forward


def masked_positions(labels: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """The flat indices of the tokens a masked-LM loss reads (label != -100), computed where the labels are
    made (the host), so the device never waits on a count; moved to `device` and marked dynamic in length
    there (the count changes with every batch: torch.compile makes one graph for all, not one per count)."""
    idx = labels.reshape(-1).ne(-100).nonzero().squeeze(1)
    if device is None:
        return idx
    idx = idx.to(device)
    torch._dynamo.mark_dynamic(idx, 0)
    return idx


def sparse_mlm_forward(model: Any) -> Any:
    """BertForMaskedLM.forward for training: (input_ids, labels, masked) -> Output(loss), the prediction
    head on the masked positions only."""
    encoder, head = model.base_model, model.cls

    def forward(input_ids: torch.Tensor, labels: torch.Tensor, masked: torch.Tensor | None = None,
                **kwargs: Any) -> Output:
        hidden = encoder(input_ids=input_ids, **kwargs)[0]
        flat = labels.reshape(-1)
        picked = masked if masked is not None else masked_positions(labels)
        scores = head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, picked))
        return Output(loss=F.cross_entropy(scores.float(), flat.index_select(0, picked)))

    return forward


_FORWARDS = {"GPT2LMHeadModel": gpt2_forward, "BertForMaskedLM": sparse_mlm_forward}
assert set(_FORWARDS) == set(TRAINING_FORWARDS.values()), "the memory plan counts what fastpath installs"


def install(model: Any, *, checkpointing: bool, tensor_parallel: int) -> str | None:
    """Give `model` its training forward when there is one for its class: the class name it was given for,
    or None (the transformers forward stays). hpclaunch's own GPT-2 (gpt2.py) has it as its forward already."""
    if getattr(model, "training_forward", False):
        return type(model).__name__
    make = _FORWARDS.get(type(model).__name__)
    task = "masked-lm" if type(model).__name__.endswith("MaskedLM") else "causal-lm"
    if make is None or not has_training_forward(model.config.model_type, task, checkpointing=checkpointing,
                                                tensor_parallel=tensor_parallel):
        return None
    model.forward = make(model)
    return type(model).__name__
