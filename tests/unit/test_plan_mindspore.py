"""`hpclaunch plan` covers recipes/gpt_mindspore (issue 9, section 4): its GPT's parameters by arithmetic on
the config (no MindSpore on a login node), fp32 states with AdamWeightDecay, explicit attention scores, and
suggestions that a MindSpore job can apply (no ZeRO, no DeepSpeed launcher)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "recipes" / "gpt_mindspore")


def _plan(hpclaunch, *args: str) -> dict:
    result = hpclaunch("plan", RECIPE, "--profile", "ascend-910", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _gpt_params(layers: int, h: int, ffn: int, vocab: int = 256, positions: int = 2048) -> int:
    """The script's GPT counted by hand: LayerNorms (weight + bias), fused qkv, proj, fc1, fc2 with biases."""
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * ffn + ffn) + (ffn * h + h)
    return layers * block + vocab * h + positions * h + 2 * h + h * vocab


def test_the_7b_and_13b_shapes_are_planned_and_do_not_fit_plain_data_parallel(hpclaunch, hpc_home):
    p7 = _plan(hpclaunch, "--preset", "7b")
    assert p7["params"] == _gpt_params(32, 4096, 11008)  # 5.05 B: seed 003's 7B shape with a GELU MLP
    # fp32 weights and gradients, two fp32 moments: 16 bytes per parameter on every one of the 8 devices
    assert abs(p7["model_states_gib"] - 16 * p7["params"] / 2**30) < 0.01
    assert p7["fits"] is False and p7["device_gib"] == 64
    assert not any("deepspeed" in s["change"] or "zero" in s["change"] for s in p7["suggestions"])
    p13 = _plan(hpclaunch, "--preset", "13b")
    assert p13["params"] == _gpt_params(40, 5120, 13824) and p13["fits"] is False


def test_the_explicit_attention_scores_are_counted(hpclaunch, hpc_home):
    short = _plan(hpclaunch, "--preset", "tiny")
    longer = _plan(hpclaunch, "--preset", "tiny", "--set", "train.seq_len=128", "--set",
                   "model.config.seq_length=128", "--set", "train.micro_batch_size=4")
    # the same tokens per micro-batch, twice the sequence: the s x s scores double, the rest stays
    assert longer["activations_gib"] > short["activations_gib"]
    assert short["fits"] is True


def test_optimizer_shard_is_refused_not_ignored(hpclaunch, hpc_home):
    result = hpclaunch("plan", RECIPE, "--profile", "ascend-910", "--preset", "7b", "--set",
                       "parallel.optimizer_shard=true")
    assert result.exit_code == 2
    assert "parallel.optimizer_shard asked, but its script does not shard the optimizer" in result.stderr
