"""`hpclaunch plan` covers recipes/gpt_mindspore (issue 9, section 4): its GPT's parameters by arithmetic on
the config (no MindSpore on a login node), fp32 states with AdamWeightDecay, explicit attention scores, and
suggestions that a MindSpore job can apply (no ZeRO, no DeepSpeed launcher)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def test_tied_embeddings_drop_the_head(hpclaunch, hpc_home):
    """untie_embeddings_and_output_weights: false makes the token embedding the LM head (the script's build_model)."""
    tied = _plan(hpclaunch, "--preset", "tiny", "--set", "model.config.untie_embeddings_and_output_weights=false")
    assert tied["params"] == _gpt_params(2, 64, 256, positions=64) - 64 * 256
    assert _plan(hpclaunch, "--preset", "tiny")["params"] == _gpt_params(2, 64, 256, positions=64)


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


@pytest.mark.parametrize("value, shown", [
    ("abc", "model.config.seq_length is 'abc' (text)"),
    ("{a: 1}", "model.config.seq_length is {'a': 1} (a mapping)"),
    ("2.5", "model.config.seq_length is 2.5 (a decimal number)"),
    ("true", "model.config.seq_length is True (true/false)"),
    ("0", "model.config.seq_length is 0 (a whole number)"),
    ("null", "model.config.seq_length is None (null)"),
])
@pytest.mark.parametrize("command", ["plan", "submit"])
def test_a_config_value_of_the_wrong_type_is_named_not_a_traceback(hpclaunch, hpc_home, value, shown, command):
    extra = ("--dry-run",) if command == "submit" else ()
    result = hpclaunch(command, RECIPE, "--profile", "ascend-910", "--preset", "tiny",
                       "--set", f"model.config.seq_length={value}", *extra)
    assert result.exit_code == 2, result.output
    assert f"recipe gpt_mindspore: {shown}: the model needs a whole number of at least 1" in result.stderr
    assert "Traceback" not in result.output
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


def test_every_value_the_plan_reads_is_checked():
    from hpclaunch.errors import NoPlan
    from hpclaunch.plan.mindspore import gpt_facts

    good = {"hidden_size": 64, "num_attention_heads": 4, "num_layers": 2, "vocab_size": 256, "seq_length": 128,
            "ffn_hidden_size": 256}
    assert gpt_facts(good, 64, source="r").params > 0
    for key, bad in (("hidden_size", "64"), ("num_attention_heads", [4]), ("num_layers", None),
                     ("vocab_size", 1.0), ("ffn_hidden_size", {}), ("seq_length", "abc")):
        with pytest.raises(NoPlan, match=f"model.config.{key} is "):
            gpt_facts({**good, key: bad}, 64, source="r")
    with pytest.raises(NoPlan, match="model.config.hidden_size is missing"):
        gpt_facts({k: v for k, v in good.items() if k != "hidden_size"}, 64, source="r")
    with pytest.raises(NoPlan, match="group_query_attention is 'yes'"):
        gpt_facts({**good, "group_query_attention": "yes"}, 64, source="r")
    with pytest.raises(NoPlan, match="model.config.num_query_groups is missing"):
        gpt_facts({**good, "group_query_attention": True}, 64, source="r")
    with pytest.raises(NoPlan, match=r"num_query_groups\(3\) does not divide"):
        gpt_facts({**good, "group_query_attention": True, "num_query_groups": 3}, 64, source="r")
