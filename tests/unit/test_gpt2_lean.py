"""hpclaunch's torch-only GPT-2 (hpclaunch/runtime/train/gpt2.py) stands in for transformers' GPT2LMHeadModel:
loaded from the same saved folder it computes the very same loss and gradients (bit for bit: the same training
forward on the same weights, dropout included), its state dict is transformers' (checkpoints and export), and
loading it imports no transformers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpclaunch.runtime.train import fastpath, gpt2  # noqa: E402
from hpclaunch.runtime.train.tokenizer import LazyTokenizer, _train_tokenizer  # noqa: E402


def _saved(tmp_path, **config):
    """transformers' GPT-2 with random weights, saved as a store folder is (config.json + model.safetensors)."""
    torch.manual_seed(3)
    cfg = transformers.GPT2Config(**{"n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 64, "vocab_size": 211,
                                     **config})
    model = transformers.GPT2LMHeadModel(cfg)
    model.save_pretrained(tmp_path)
    return model


def _step(model, ids, seed):
    """One training forward and backward: (loss, {name: grad})."""
    torch.manual_seed(seed)  # dropout draws the same masks in the same order
    model.zero_grad()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("activation", ["gelu_new", "gelu", "relu"])
def test_the_same_loss_and_gradients_as_transformers_bit_for_bit(tmp_path, dropout, activation):
    reference = _saved(tmp_path, resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                       activation_function=activation)
    reference = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).train()
    assert fastpath.install(reference, checkpointing=False, tensor_parallel=1) == "GPT2LMHeadModel"
    lean = gpt2.GPT2.from_pretrained(tmp_path).train()
    assert fastpath.install(lean, checkpointing=False, tensor_parallel=1) == "GPT2"
    ids = torch.randint(0, 211, (3, 48))
    ref_loss, ref_grads = _step(reference, ids, seed=7)
    loss, grads = _step(lean, ids, seed=7)
    assert torch.equal(loss, ref_loss)
    assert list(grads) == list(ref_grads)  # the same parameters in the same order (optimizer groups, DDP buckets)
    for name in ref_grads:
        assert torch.equal(grads[name], ref_grads[name]), name


def test_the_state_dict_is_transformers_and_the_head_stays_tied(tmp_path):
    reference = _saved(tmp_path)
    lean = gpt2.GPT2.from_pretrained(tmp_path)
    assert lean.state_dict().keys() == reference.state_dict().keys()
    assert lean.lm_head.weight is lean.transformer.wte.weight
    back = transformers.GPT2LMHeadModel(reference.config)
    missing, unexpected = back.load_state_dict(lean.state_dict(), strict=True)  # a checkpoint loads in transformers
    assert not missing and not unexpected
    assert sum(p.numel() for p in lean.parameters()) == sum(p.numel() for p in reference.parameters())


def test_a_hub_file_with_the_original_names_and_mask_buffers_loads(tmp_path):
    """The hub's original GPT-2 files name the weights without `transformer.` and carry `attn.bias` buffers."""
    from safetensors.torch import load_file, save_file

    reference = _saved(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    old = {k.removeprefix("transformer."): v for k, v in state.items()}
    old["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 64, 64))
    save_file(old, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    lean = gpt2.GPT2.from_pretrained(tmp_path)
    for name, tensor in reference.state_dict().items():
        assert torch.equal(lean.state_dict()[name], tensor), name


def test_weights_of_another_shape_are_an_error_that_names_them(tmp_path):
    _saved(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    with pytest.raises(ValueError, match=r"missing \['transformer\.h\.2"):
        gpt2.GPT2.from_pretrained(tmp_path)


def test_configs_it_does_not_build_are_named():
    assert gpt2.unsupported({"model_type": "gpt2"}) is None
    assert gpt2.unsupported({"model_type": "gpt2", "reorder_and_upcast_attn": True}) == "reorder_and_upcast_attn: true"
    assert gpt2.unsupported({"model_type": "gpt2", "activation_function": "quick_gelu"}) == (
        "activation_function 'quick_gelu'")
    assert gpt2.unsupported({"model_type": "llama"}) == "model_type 'llama'"


def test_its_saved_config_is_the_one_transformers_reads(tmp_path):
    _saved(tmp_path / "model", n_layer=3)
    config = gpt2.Config.from_pretrained(tmp_path / "model")
    config.resid_pdrop = 0.0
    config.save_pretrained(tmp_path / "export")
    back = transformers.AutoConfig.from_pretrained(tmp_path / "export")
    assert (back.model_type, back.n_layer, back.resid_pdrop, back.n_embd) == ("gpt2", 3, 0.0, 64)
    with pytest.raises(AttributeError, match="no key 'hidden_sizes'"):
        config.hidden_sizes  # noqa: B018


@pytest.mark.parametrize("kind", ["bpe", "wordpiece"])
def test_the_lazy_tokenizer_counts_and_tokenizes_as_transformers(tmp_path, kind):
    texts = ["To be, or not to be, that is the question:", "Whether 'tis nobler in the mind to suffer"] * 20
    _train_tokenizer(kind, 120, texts, tmp_path / "tok")
    real = transformers.AutoTokenizer.from_pretrained(tmp_path / "tok")
    lazy = LazyTokenizer(tmp_path / "tok")
    assert len(lazy) == len(real)
    assert lazy._loaded is None  # counting did not load transformers' tokenizer
    assert lazy(texts[:2])["input_ids"] == real(texts[:2])["input_ids"]
    lazy.save_pretrained(tmp_path / "export")
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    assert again(texts[:2])["input_ids"] == real(texts[:2])["input_ids"]


def test_loading_it_imports_no_transformers(tmp_path):
    _saved(tmp_path)
    code = ("import sys; from hpclaunch.runtime.train import build, gpt2, tokenizer; "
            f"m = gpt2.GPT2.from_pretrained({str(tmp_path)!r}); "
            "print(sorted(p for p in ('transformers', 'deepspeed', 'sympy', 'torch._dynamo') if p in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
