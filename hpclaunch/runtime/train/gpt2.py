"""GPT-2 in plain PyTorch, for training: the modules, parameter names and weights of transformers'
GPT2LMHeadModel, without importing transformers.

Why: a rank that builds its model through transformers imports `transformers.modeling_utils`, and with it DTensor,
sympy and torch._dynamo — about a second of CPU per rank before the first step, on every node of a job
(docs/benchmarks.md#rank-start-up). This model loads the very same `config.json` and `model.safetensors`
(safetensors only), trains through the same training forward (fastpath.py: fused QKV, causal SDPA, the same
loss), and its `state_dict()` has transformers' keys, so checkpoints, `hpclaunch export` and resumes are the
same files either way. Held equal to transformers' model in loss and gradients by tests/unit/test_gpt2_lean.py.

`supported(config)` says which GPT-2 configs it builds; anything else (cross-attention, the layer-scaled or
upcast attention variants, an activation not listed) keeps transformers' model (build.py decides).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hpclaunch.runtime.train.fastpath import gpt2_train_forward

# GPT2Config's defaults (transformers), for the keys a config.json may leave out
DEFAULTS: dict[str, Any] = {
    "model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
    "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "scale_attn_weights": True, "use_cache": True,
    "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False, "add_cross_attention": False,
    "tie_word_embeddings": True,
}
CONFIG = "config.json"
WEIGHTS = "model.safetensors"


def _gelu_new(x: torch.Tensor) -> torch.Tensor:
    """transformers' NewGELUActivation (GPT-2's `gelu_new`), the same operations in the same order."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


ACTIVATIONS: dict[str, Any] = {
    "gelu_new": _gelu_new,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


class Config:
    """A GPT-2 config.json as attributes (what the overrides, the metrics and the engines read), written back
    as it was read plus any changed keys."""

    model_type = "gpt2"

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update({**DEFAULTS, **values})

    def __getattr__(self, name: str) -> Any:  # the keys set in __init__ (typed Any); any other is missing
        raise AttributeError(f"a GPT-2 config has no key {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:  # a key changed (overrides) or added (loss_type)
        self.__dict__[name] = value

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> Config:
        return cls(json.loads((Path(folder) / CONFIG).read_text()))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def save_pretrained(self, folder: str | Path) -> None:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        values = {k: str(v).removeprefix("torch.") if isinstance(v, torch.dtype) else v
                  for k, v in self.__dict__.items()}
        (out / CONFIG).write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")


def unsupported(config: Config | dict[str, Any]) -> str | None:
    """Why this model cannot stand in for transformers' for `config`, or None when it can."""
    c = config if isinstance(config, dict) else config.to_dict()
    c = {**DEFAULTS, **c}
    if c["model_type"] != "gpt2":
        return f"model_type {c['model_type']!r}"
    for key in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if c[key]:
            return f"{key}: true"
    if not c["scale_attn_weights"]:
        return "scale_attn_weights: false"
    if not c["tie_word_embeddings"]:
        return "tie_word_embeddings: false"
    if c["activation_function"] not in ACTIVATIONS:
        return f"activation_function {c['activation_function']!r}"
    return None


class Conv1D(nn.Module):
    """GPT-2's projection: a weight of shape (in, out) (transposed to nn.Linear's), bias added by addmm."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*x.shape[:-1], self.weight.shape[1])


class Head(nn.Module):
    """The LM head: nn.Linear without a bias, whose weight (tied to the token embedding) needs no init of its own."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight: torch.Tensor = nn.Parameter(torch.empty(n_out, n_in))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class Activation(nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.fn = name, ACTIVATIONS[name]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


class Attention(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.c_attn = Conv1D(c.n_embd, 3 * c.n_embd)
        self.c_proj = Conv1D(c.n_embd, c.n_embd)
        self.attn_dropout = nn.Dropout(c.attn_pdrop)
        self.resid_dropout = nn.Dropout(c.resid_pdrop)


class MLP(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        inner = c.n_inner or 4 * c.n_embd
        self.c_fc = Conv1D(c.n_embd, inner)
        self.c_proj = Conv1D(inner, c.n_embd)
        self.act = Activation(c.activation_function)
        self.dropout = nn.Dropout(c.resid_pdrop)


class Block(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.attn = Attention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.mlp = MLP(c)


class Transformer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.n_embd, _weight=torch.empty(c.vocab_size, c.n_embd))  # no init
        self.wpe = nn.Embedding(c.n_positions, c.n_embd, _weight=torch.empty(c.n_positions, c.n_embd))
        self.drop = nn.Dropout(c.embd_pdrop)
        self.h = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)


def _gpt2_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' names for a GPT-2 weight file's tensors: the hub's original files name the base model's
    weights without `transformer.` and hold the causal-mask buffers (`attn.bias`, `attn.masked_bias`), which
    this model does not keep; the tied LM head is saved once, as the token embedding."""
    out = {}
    for name, tensor in state.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        out[name if name.startswith(("transformer.", "lm_head.")) else f"transformer.{name}"] = tensor
    out.setdefault("lm_head.weight", out["transformer.wte.weight"])
    return out


class GPT2(nn.Module):
    """GPT2LMHeadModel's modules in its registration order (so parameters, optimizer groups and DDP buckets come
    in the same order), the LM head tied to the token embedding."""

    model_name = "GPT-2 (hpclaunch.runtime.train.gpt2, no transformers)"
    training_forward = True  # its forward is fastpath's training forward (fastpath.install leaves it)

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.transformer = Transformer(config)
        self.lm_head = Head(config.n_embd, config.vocab_size)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Any:
        return gpt2_train_forward(self, input_ids, labels)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.transformer.wte

    def get_output_embeddings(self) -> Head:
        return self.lm_head

    @classmethod
    def from_pretrained(cls, folder: str | Path, config: Config | None = None) -> GPT2:
        """The model of `folder`'s config.json (or `config`) with `folder`'s safetensors weights, in float32 on
        the CPU; its tensors are made empty, so no time goes into an initialisation the weights replace (and not
        on the meta device, whose ops import torch._dynamo). A weight file whose names or shapes differ from
        GPT-2's is an error that names them."""
        from safetensors.torch import load_file

        config = config or Config.from_pretrained(folder)
        model = cls(config)
        state = _gpt2_names(load_file(str(Path(folder) / WEIGHTS)))
        missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
        if missing or unexpected:
            raise ValueError(f"{Path(folder) / WEIGHTS} is not a GPT-2 checkpoint of this config: "
                             f"missing {missing[:5]}, unexpected {unexpected[:5]}")
        model.lm_head.weight = model.transformer.wte.weight  # assign= replaced the tensors: tie them again
        return model.float()
