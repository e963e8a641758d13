"""The training forwards of hpclaunch.runtime.train.fastpath compute the transformers forward's loss and
gradients (on the CPU, fp32, no dropout), on fresh random weights and tokens for each case."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hpclaunch.runtime.train import fastpath  # noqa: E402


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _compare(reference, fast, inputs, fast_inputs) -> None:
    ref_loss = reference(**inputs).loss
    ref_loss.backward()
    loss = fast(**fast_inputs).loss
    loss.backward()
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    ref, got = _grads(reference), _grads(fast)
    assert ref.keys() == got.keys() and ref
    for name in ref:
        err = (got[name] - ref[name]).norm() / ref[name].norm().clamp_min(1e-12)
        assert err < 1e-4, (name, float(err))


@pytest.mark.parametrize("seed", [0, 1])
def test_gpt2_forward_is_the_transformers_loss_and_gradients(seed: int) -> None:
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=211,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    reference = transformers.GPT2LMHeadModel(config).train()
    fast = copy.deepcopy(reference)
    assert fastpath.install(fast, checkpointing=False, tensor_parallel=1) == "GPT2LMHeadModel"
    ids = torch.randint(0, 211, (3, 48))
    _compare(reference, fast, {"input_ids": ids, "labels": ids}, {"input_ids": ids, "labels": ids})
    assert fast.state_dict().keys() == reference.state_dict().keys()  # checkpoints and export unchanged


@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_masked_lm_is_the_transformers_loss_and_gradients(seed: int) -> None:
    torch.manual_seed(seed)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                     intermediate_size=128, vocab_size=307, max_position_embeddings=64,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    reference = transformers.BertForMaskedLM(config).train()
    fast = copy.deepcopy(reference)
    assert fastpath.install(fast, checkpointing=False, tensor_parallel=1) == "BertForMaskedLM"
    ids = torch.randint(5, 307, (4, 40))
    labels = torch.where(torch.rand(ids.shape) < 0.15, ids, torch.full_like(ids, -100))
    labels[0, 3] = ids[0, 3]  # at least one masked token
    inputs = {"input_ids": ids, "labels": labels}
    _compare(reference, fast, inputs, {**inputs, "masked": fastpath.masked_positions(labels)})


def test_other_models_and_checkpointed_ones_keep_the_transformers_forward() -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=16, vocab_size=50)
    model = transformers.GPT2LMHeadModel(config)
    assert fastpath.install(model, checkpointing=True, tensor_parallel=1) is None
    assert "forward" not in vars(model)
    bert = transformers.BertForSequenceClassification(transformers.BertConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64))
    assert fastpath.install(bert, checkpointing=False, tensor_parallel=1) is None
