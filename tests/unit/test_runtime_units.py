"""Unit tests of the recipe runtime (hpclaunch/runtime): one optimizer step against a step computed
by hand, the LR schedule, override_config.json checks, masking, data positions, asset errors."""

from __future__ import annotations

import copy
import json
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpclaunch.config.overrides import apply_overrides, read_override  # noqa: E402
from hpclaunch.config.recipe import TrainSpec  # noqa: E402
from hpclaunch.errors import AssetError, ConfigError  # noqa: E402
from hpclaunch.runtime.train.data import Batches, mask_tokens  # noqa: E402
from hpclaunch.runtime.train.distributed import Dist  # noqa: E402
from hpclaunch.runtime.train.engine import TorchEngine  # noqa: E402
from hpclaunch.runtime.train.schedule import lr_at  # noqa: E402

CPU = Dist(rank=0, world_size=1, local_rank=0, accelerator="cpu", backend="gloo", device=torch.device("cpu"))


def _tiny_gpt2(seed: int = 0):
    config = transformers.GPT2Config(
        n_layer=1,
        n_embd=16,
        n_head=2,
        n_positions=16,
        vocab_size=50,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(config)


def _reference_step(model, micro_batches, state, *, lr, wd, clip, betas=(0.9, 0.95), eps=1e-8):
    """One AdamW step written out by hand: gradient of the mean loss over the micro-batches from
    zero, clipped to `clip` by global norm, decoupled weight decay on matrices only."""
    params = [p for p in model.parameters()]
    losses = [model(input_ids=b, labels=b).loss for b in micro_batches]
    grads = torch.autograd.grad(sum(losses) / len(losses), params)
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads)).float()
    scale = min(1.0, clip / (float(norm) + 1e-6))
    state["t"] = state.get("t", 0) + 1
    t = state["t"]
    with torch.no_grad():
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            g = g * scale
            m = state.setdefault(("m", i), torch.zeros_like(p))
            v = state.setdefault(("v", i), torch.zeros_like(p))
            m.mul_(betas[0]).add_(g, alpha=1 - betas[0])
            v.mul_(betas[1]).addcmul_(g, g, value=1 - betas[1])
            if p.dim() >= 2:
                p.mul_(1 - lr * wd)
            denom = (v / (1 - betas[1] ** t)).sqrt() + eps
            p.sub_(lr * (m / (1 - betas[0] ** t)) / denom)
    return float(norm)


def test_optimizer_steps_match_a_step_computed_by_hand():
    """Two steps with grad accumulation 2 and an active clip: catches clipping before backward,
    gradients never zeroed, and unscaled accumulation (seed 000's loop bugs)."""
    lr, wd, clip = 1e-2, 0.1, 0.05
    train = TrainSpec(lr=lr, min_lr=lr, weight_decay=wd, warmup_steps=0, max_steps=10, grad_clip=clip)
    model = _tiny_gpt2()
    reference = copy.deepcopy(model)
    engine = TorchEngine(model, train, CPU, "fp32", grad_accum=2)
    g = torch.Generator().manual_seed(1)
    state: dict = {}
    for _step in range(2):
        micro = [torch.randint(50, (2, 8), generator=g) for _ in range(2)]
        engine.zero_grad()
        for i, b in enumerate(micro):
            engine.micro_step({"input_ids": b, "labels": b}, last=i == 1)
        norm = engine.step()
        ref_norm = _reference_step(reference, micro, state, lr=lr, wd=wd, clip=clip)
        assert float(norm) == pytest.approx(ref_norm, rel=1e-4)
        assert ref_norm > clip  # the clip really acted
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6, rtol=1e-5), name


def test_lr_schedule_warms_up_then_decays_to_min_lr():
    kw = dict(lr=1.0, min_lr=0.1, warmup=4, max_steps=20)
    assert [lr_at(s, **kw) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(4, **kw) == 1.0
    assert lr_at(12, **kw) == pytest.approx(0.55)
    assert lr_at(20, **kw) == pytest.approx(0.1)
    values = [lr_at(s, **kw) for s in range(4, 21)]
    assert values == sorted(values, reverse=True)


def test_override_config_sets_keys_and_dtype_by_name():
    config = transformers.MixtralConfig()
    changes = apply_overrides(
        config,
        {"num_hidden_layers": 1, "attention_dropout": 0.0, "torch_dtype": "bfloat16"},
        source="override_config.json",
    )
    assert config.num_hidden_layers == 1 and config.dtype == torch.bfloat16
    assert any("num_hidden_layers: 32 -> 1" in c for c in changes)


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"num_hiden_layers": 1}, ["num_hiden_layers", "unknown key", "num_hidden_layers"]),
        ({"num_hidden_layers": "1"}, ["num_hidden_layers", "'1' is a str", "is a int"]),
        ({"torch_dtype": "bf16"}, ["torch_dtype", "'bf16' is not a dtype name", "bfloat16"]),
    ],
)
def test_override_config_errors_name_the_key(overrides, words):
    with pytest.raises(ConfigError) as e:
        apply_overrides(
            transformers.MixtralConfig(), overrides, source="recipes/mixtral/override_config.json"
        )
    assert "recipes/mixtral/override_config.json" in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_override_file_must_be_a_json_object(tmp_path):
    p = tmp_path / "override_config.json"
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        read_override(p)
    p.write_text(json.dumps({"num_hidden_layers": 1}))
    assert read_override(p) == {"num_hidden_layers": 1}


def test_batches_resume_from_a_position_gives_the_same_batches():
    blocks = torch.arange(200).reshape(50, 4)
    a = Batches(blocks, 3, rank=1, world_size=2, seed=7)
    seen = [a.next() for _ in range(20)]  # crosses an epoch (8 batches per epoch)
    b = Batches(blocks, 3, rank=1, world_size=2, seed=7)
    for _ in range(11):
        b.next()
    c = Batches(blocks, 3, rank=1, world_size=2, seed=7)
    c.restore(b.position)
    assert all(torch.equal(x, y) for x, y in zip(seen[11:], [c.next() for _ in range(9)], strict=True))
    assert not torch.equal(seen[0], seen[8])  # reshuffled by set_epoch


def test_mask_tokens_masks_about_15_percent_and_never_special_tokens():
    tok = type("Tok", (), {"all_special_ids": [0, 1], "mask_token_id": 4, "__len__": lambda self: 100})()
    ids = torch.randint(5, 100, (64, 128))
    ids[:, 0], ids[:, -1] = 0, 1
    inputs, labels = mask_tokens(ids, tok, 0.15, torch.Generator().manual_seed(0))
    chosen = labels != -100
    assert 0.13 < chosen.float().mean() < 0.17
    assert not chosen[:, 0].any() and not chosen[:, -1].any()
    assert torch.equal(labels[chosen], ids[chosen])
    assert 0.75 < (inputs[chosen] == 4).float().mean() < 0.85


def test_missing_hub_asset_names_it_and_the_stage_command(tmp_path, monkeypatch):
    from hpclaunch.runtime.train.assets import hub_asset

    monkeypatch.setenv("HPCLAUNCH_ASSET_STORE", str(tmp_path))
    spec = type(
        "S",
        (),
        {
            "preset": "full",
            "recipe_arg": "gpt2",  # the JobSpec's: the recipe and the profile as a command names them
            "profile_arg": "guangzhou-a800",
        },
    )()
    with pytest.raises(AssetError) as e:
        hub_asset(spec, "model", "gpt2")
    msg = str(e.value)
    assert "model 'gpt2'" in msg and "not staged" in msg
    assert "hpclaunch stage-assets gpt2 --profile guangzhou-a800 --preset full" in msg
    (tmp_path / "models" / "gpt2" / "main").mkdir(parents=True)
    with pytest.raises(AssetError, match="incomplete"):
        hub_asset(spec, "model", "gpt2")


def test_perplexity_is_exp_of_the_mean_loss():
    from hpclaunch.runtime.train.loop import evaluate

    class Fixed:
        model = torch.nn.Identity()

        def forward_loss(self, inputs):
            return inputs["loss"]

    losses = [torch.tensor(2.0), torch.tensor(4.0)]
    mean = evaluate(Fixed(), [0, 1], lambda b, s, i: {"loss": losses[b]}, 0, CPU)
    assert mean == 3.0 and math.exp(mean) == pytest.approx(20.0855, rel=1e-4)


@pytest.mark.parametrize("kind", ["bpe", "wordpiece"])
def test_a_generated_tokenizer_names_the_class_transformers_4_and_5_both_load(tmp_path, kind):
    """The store's generated tokenizers are shared by jobs whose environments may have transformers 4 or 5: 5
    writes its own class name (TokenizersBackend), which 4.x refuses; the runtime writes the name both load."""
    from hpclaunch.runtime.train.tokenizer import _train_tokenizer

    _train_tokenizer(kind, 120, ["to be or not to be that is the question"] * 20, tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ids = tok("to be or not")["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True).strip() == "to be or not", ids
