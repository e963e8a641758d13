"""The model's facts for the memory plan, from its config alone: built on torch's meta device (no weights,
no GPU, offline), from the staged config.json of a hub model or the recipe's `model_type` + `config`, with
the recipe's `model.config` keys and override_config.json applied as the job applies them
(hpclaunch/runtime/train/build.py).

torch and transformers are imported only here, only when a model must be built: the result is cached
(hpclaunch/core/cache.py), keyed on everything the config is made of, so a second plan or dry-run of the same
model reads one small JSON file (building Mixtral-8x7B on the meta device takes seconds).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.profile import asset_store
from hpclaunch.core import cache
from hpclaunch.errors import NoPlan
from hpclaunch.plan import mindspore
from hpclaunch.plan.memory import ModelFacts

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

CACHE_KIND = "plan-model"
_MEMO: dict[str, ModelFacts] = {}


def config_inputs(spec: JobSpec) -> dict[str, Any]:
    """Everything the model's config is made of, as JSON data (the cache key); NoPlan when it cannot be read
    here (a hub model whose config is not staged, a recipe without a model)."""
    from hpclaunch.assets.store import asset_path, store_root

    m = spec.recipe.model
    if m is None:
        raise NoPlan(f"recipe {spec.recipe.name} has no model section")
    if spec.recipe.launcher == "msrun":
        raise NoPlan(f"model type {m.model_type!r} under msrun: the plan knows the torch models and "
                     "recipes/gpt_mindspore's GPT")
    base: dict[str, Any] | None = None
    vocab: int | None = None
    if m.source == "generate":
        tok = spec.recipe.tokenizer
        vocab = tok.vocab_size if tok is not None and tok.source == "train" else None
    else:
        assert m.repo is not None  # ModelSpec's validator: source hub needs a repo
        staged = asset_path(store_root(asset_store(spec.profile)), "model", m.repo, m.revision) / "config.json"
        try:
            base = json.loads(staged.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError):
                raise NoPlan(f"the config of model {m.repo!r} is not staged: {staged}",
                             hint=f"`hpclaunch plan` fetches it alone from the profile's mirror; offline: "
                                  f"{import_command(spec)}") from None
            raise NoPlan(f"the config of model {m.repo!r} is not JSON ({exc}): {staged}",
                         hint=f"stage it again: hpclaunch stage-assets --model {m.repo}{_at(m.revision)} "
                              f"--profile {spec.profile_arg}") from None
    override: dict[str, Any] = {}
    if m.override_config:
        from hpclaunch.config.overrides import read_override

        override = read_override(Path(spec.recipe_dir) / m.override_config)
    return {"task": spec.recipe.task, "model_type": m.model_type, "base": base, "vocab_size": vocab,
            "config": dict(m.config), "override": override}


def _at(revision: str) -> str:
    return "" if revision == "main" else f"@{shlex.quote(revision)}"


def import_command(spec: JobSpec) -> str:
    """How to bring the config of the job's hub model into the store by hand, where this machine has no network."""
    m = spec.recipe.model
    assert m is not None and m.repo is not None
    revision = "" if m.revision == "main" else f" --revision {shlex.quote(m.revision)}"
    return (f"download config.json of {m.repo} where there is network (from the hub or a mirror: "
            f"https://huggingface.co/{m.repo}/resolve/{m.revision}/config.json), bring it here and run "
            f"`hpclaunch assets import config.json --model {m.repo}{revision} --profile {spec.profile_arg}`")


def fetch_config(spec: JobSpec, endpoints: Sequence[str] = ()) -> str | None:
    """`hpclaunch plan`: when the store lacks the config.json of the job's hub model, fetch that file alone from
    `endpoints` (default: the profile's mirror, then its endpoints) into the store, marked config-only (a submit
    still refuses the job until its weights are staged). What was done, in words; None when nothing was
    fetched. NoPlan when no endpoint answered (how to import the file by hand) or the fetch failed."""
    from hpclaunch.assets.stage import Unreachable
    from hpclaunch.assets.workflow import stage_config
    from hpclaunch.errors import AssetError

    if spec.recipe.launcher == "msrun":
        return None
    try:
        done = stage_config(spec, endpoints)
    except Unreachable as exc:
        m = spec.recipe.model
        assert m is not None
        tried = exc.message.partition(":\n")[2].strip()
        raise NoPlan(f"the config of model {m.repo!r} is not in the store {asset_store(spec.profile)}, and no "
                     f"endpoint answered to fetch it:\n  {tried}",
                     hint=f"{import_command(spec)}; or give --endpoint URL of a mirror that answers") from None
    except AssetError as exc:
        raise NoPlan(f"the config of the job's model could not be fetched: {exc.message}", hint=exc.hint) from None
    if done is None:
        return None
    preset = f" --preset {shlex.quote(spec.preset)}" if spec.preset else ""
    return (f"fetched the config of model {done.request.repo_id} alone from {done.endpoint} into {done.path} "
            f"(config only: a submit still needs its weights: hpclaunch stage-assets {spec.recipe_arg} "
            f"--profile {spec.profile_arg}{preset})")


def model_facts(spec: JobSpec) -> ModelFacts:
    m = spec.recipe.model
    if spec.recipe.launcher == "msrun" and m is not None and m.model_type == mindspore.MODEL_TYPE:
        return mindspore.gpt_facts(dict(m.config), spec.recipe.train.seq_len, source=f"recipe {spec.recipe.name}")
    inputs = config_inputs(spec)
    name = cache.key(json.dumps(inputs, sort_keys=True, default=str), _transformers_version(),
                     cache.code_stamp("plan/model.py"))
    if name in _MEMO:
        return _MEMO[name]
    hit = cache.get(CACHE_KIND, name)
    facts = None
    if isinstance(hit, dict):
        try:
            facts = ModelFacts(**hit)
        except TypeError:
            facts = None
    if facts is None:
        facts = build_facts(inputs, source=f"recipe {spec.recipe.name}")
        cache.put(CACHE_KIND, name, asdict(facts))
    _MEMO[name] = facts
    return facts


def _transformers_version() -> str:
    """Where transformers is installed and when (a reinstall is a cache miss); not importlib.metadata, which
    costs a dry run 10 ms to import."""
    import importlib.util
    import os

    found = importlib.util.find_spec("transformers")
    if found is None or found.origin is None:
        return ""
    st = os.stat(found.origin)
    return f"{found.origin}:{st.st_size}:{st.st_mtime_ns}"


def build_facts(inputs: dict[str, Any], *, source: str) -> ModelFacts:
    """Build the model on the meta device and read its facts (imports torch and transformers)."""
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise NoPlan(f"the plan builds the model on torch's meta device and needs torch and transformers ({exc})",
                     hint="pip install 'hpclaunch[recipes]'") from None
    from transformers.utils import logging as hf_logging

    # quiet: a generated config's default token ids lie outside a small vocabulary until the job sets them
    # from its tokenizer, which transformers would warn about here
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return _build(torch, inputs, source)
    finally:
        hf_logging.set_verbosity(verbosity)


def _build(torch: Any, inputs: dict[str, Any], source: str) -> ModelFacts:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    from hpclaunch.config.overrides import apply_overrides

    base = dict(inputs["base"] or {})
    model_type = base.pop("model_type", None) or inputs["model_type"]
    extra = {"vocab_size": inputs["vocab_size"]} if inputs["vocab_size"] else {}
    try:
        config = AutoConfig.for_model(model_type, **base, **extra)
    except (ValueError, KeyError) as exc:
        raise NoPlan(f"{source}: model type {model_type!r} is not a transformers model ({exc})") from None
    apply_overrides(config, inputs["config"], source=f"{source}: model.config")
    apply_overrides(config, inputs["override"], source=f"{source}: model.override_config")
    auto = AutoModelForMaskedLM if inputs["task"] == "masked-lm" else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    return facts_of(model, config)


# transformers activations written as a chain of elementwise torch ops (each keeps its output in eager mode)
COMPOSITE_ACTS = ("gelu_new", "gelu_fast", "gelu_python_tanh", "gelu_accurate", "quick_gelu", "gelu_python")


def _get(config: Any, *names: str, default: int = 0) -> int:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return default


def facts_of(model: Any, config: Any) -> ModelFacts:
    """ModelFacts of a transformers model (on any device) and its config."""
    import torch

    params = sum(p.numel() for p in model.parameters())  # shared (tied) weights once
    hidden = _get(config, "hidden_size", "n_embd", "d_model")
    heads = _get(config, "num_attention_heads", "n_head", default=1)
    blocks = [sum(p.numel() for p in child.parameters())
              for lst in model.modules() if isinstance(lst, torch.nn.ModuleList) for child in lst]
    for emb in (model.get_input_embeddings(), model.get_output_embeddings()):
        if emb is not None:
            blocks.append(sum(p.numel() for p in emb.parameters()))
    act = str(getattr(config, "hidden_act", "") or getattr(config, "activation_function", ""))
    return ModelFacts(
        tp_params=tp_params(model),
        params=params,
        layers=_get(config, "num_hidden_layers", "n_layer", "num_layers"),
        hidden=hidden,
        heads=heads,
        kv_heads=_get(config, "num_key_value_heads", default=heads),
        intermediate=_get(config, "intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden),
        vocab=_get(config, "vocab_size"),
        experts=_get(config, "num_local_experts", "num_experts", default=1),
        top_k=_get(config, "num_experts_per_tok", default=1),
        gated_mlp=act in ("silu", "swish", "swiglu"),
        composite_act=act in COMPOSITE_ACTS,
        largest_block=max(blocks, default=params),
        model_type=str(getattr(config, "model_type", "")),
    )


def tp_params(model: Any) -> int:
    """Parameters the model's tensor-parallel plan (transformers' `tp_plan`: module name patterns with `*` for a
    layer index) splits; 0 when the model has none."""
    import re

    plan = getattr(model, "tp_plan", None) or getattr(model, "_tp_plan", None) or {}
    if not plan:
        return 0
    patterns = [re.compile(re.escape(k).replace(r"\*", r"\d+") + r"(\.|$)") for k in plan]
    seen: set[int] = set()
    total = 0
    for name, p in model.named_parameters():
        if id(p) not in seen and any(pat.match(name) for pat in patterns):
            seen.add(id(p))
            total += p.numel()
    return total
