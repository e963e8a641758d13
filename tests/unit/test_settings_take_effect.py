"""Every setting either takes effect or is refused before queueing (issue 9, 3b): the ones that used to be
accepted and then ignored by the job."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, expected", [
    (("mixtral", "--preset", "tiny", "--set", 'deepspeed.config={"optimizer": {"type": "Adam", "params": {"lr": 1}}}'),
     "deepspeed.config: optimizer: the recipes pass DeepSpeed their own AdamW"),
    (("bert_large", "--preset", "tiny", "--set", 'deepspeed.config={"scheduler": {"type": "WarmupLR"}}'),
     "deepspeed.config: scheduler:"),
    (("bert_large", "--preset", "tiny", "--set", 'deepspeed.config={"checkpoint": {"writer": {"type": "python"}}}'),
     "deepspeed.config: checkpoint.writer: DeepSpeed's fast and decoupled writers read CROSS_RANK/CROSS_SIZE"),
    (("gpt2", "--preset", "tiny", "--set", "parallel.model_parallel=2"),
     "recipe gpt2: model_parallel(2) asked, but its script implements data parallelism only"),
    (("mixtral", "--preset", "tiny", "--set", "parallel.model_parallel=2"),
     "DeepSpeed shards with ZeRO and would ignore it"),
    (("mixtral", "--preset", "tp", "--set", "parallel.pipeline_stage=2"),
     "parallel.pipeline_stage=2: the torch recipes implement tensor and data parallelism, not pipeline stages"),
    (("mixtral", "--preset", "tp", "--set", "parallel.optimizer_shard=true"),
     "parallel: optimizer_shard=True are MindSpore settings (launcher msrun) that torchrun would ignore"),
    (("mixtral", "--preset", "tp", "--set", "parallel.model_parallel=4", "--set",
      "model.config.num_attention_heads=4"),
     "model_parallel(4) does not divide num_key_value_heads(2)"),
    (("mixtral", "--preset", "tiny", "--set", "deepspeed.zero_stage=2", "--set", "deepspeed.offload_param=true"),
     "deepspeed.offload_param: parameter offload is a ZeRO-3 feature, and deepspeed.zero_stage is 2"),
    (("bert_large", "--preset", "tiny", "--set", "deepspeed.zero_stage=0", "--set", "deepspeed.offload_param=true"),
     "set deepspeed.zero_stage=3 with it, or deepspeed.offload_optimizer=true"),
    (("mixtral", "--preset", "tiny", "--set", "deepspeed.zero_stage=1", "--set",
      'deepspeed.config={"zero_optimization": {"offload_param": {"device": "cpu"}}}'),
     "deepspeed.config.zero_optimization.offload_param: parameter offload is a ZeRO-3 feature"),
])
def test_a_setting_the_job_would_ignore_is_refused(hpclaunch, hpc_home: Path, args: tuple[str, ...],
                                                   expected: str) -> None:
    recipe, *rest = args
    result = hpclaunch("submit", str(REPO / "recipes" / recipe), "--profile", "local", *rest, "--dry-run")
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and "Traceback" not in result.output
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


def test_the_same_settings_done_the_supported_way_are_accepted(hpclaunch, hpc_home: Path) -> None:
    for recipe, sets in (("mixtral", ("--set", 'deepspeed.config={"zero_optimization": {"reduce_bucket_size": 1000}}')),
                         ("gpt2", ("--set", "launcher=deepspeed", "--set", "train.compile=true")),  # in DeepSpeed
                         ("mixtral", ("--set", "deepspeed.zero_stage=3", "--set", "deepspeed.offload_param=true"))):
        result = hpclaunch("submit", str(REPO / "recipes" / recipe), "--profile", "local", "--preset", "tiny",
                           *sets, "--dry-run")
        assert result.exit_code == 0, result.output


def test_the_tp_plan_halves_what_a_rank_holds(hpclaunch, hpc_home: Path) -> None:
    """`hpclaunch plan`: tp 2 x dp 2 on 4 devices keeps the global batch of DDP on 4 and holds about half of
    the model states per device (Mixtral's tp_plan splits all but the norms and the router)."""
    import json

    plans = {}
    for preset in ("tp", "tp1"):
        result = hpclaunch("plan", str(REPO / "recipes" / "mixtral"), "--profile", "local", "--preset", preset,
                           "--set", "model.config.hidden_size=1024", "--set", "model.config.intermediate_size=4096",
                           "--json")  # wide enough for GiB figures with three decimals
        assert result.exit_code == 0, result.output
        plans[preset] = json.loads(result.stdout)
    tp, ddp = plans["tp"], plans["tp1"]
    assert (tp["tensor_parallel"], tp["data_parallel"]) == (2, 2)
    assert (ddp["tensor_parallel"], ddp["data_parallel"]) == (1, 4)
    assert tp["global_batch"] == ddp["global_batch"] == 16 and tp["tokens_per_step"] == ddp["tokens_per_step"]
    assert 0.5 <= tp["model_states_gib"] / ddp["model_states_gib"] < 0.51  # the norms and routers stay whole
    assert tp["activations_gib"] < ddp["activations_gib"] * 2  # twice the micro-batch, its inner tensors halved


@pytest.mark.parametrize("args, expected, hint", [
    (("bert_large",), "recipe bert_large runs under launcher deepspeed, and profile 'musa-s4000' has accelerator "
                      "musa: DeepSpeed has no MUSA accelerator",
     "its script runs under torchrun too: `--set launcher=torchrun --set deepspeed=null`"),
    (("mixtral",), "recipe mixtral runs under launcher deepspeed", "`--set launcher=torchrun --set deepspeed=null`"),
    (("gpt2", "--set", "launcher=deepspeed", "--set", "train.compile=false"),
     "runs under launcher deepspeed (--set launcher=deepspeed)", "recipe gpt2's own launcher is torchrun"),
    (("gpt_mindspore", "--preset", "tiny"), "recipe gpt_mindspore runs under launcher msrun, and profile "
                                            "'musa-s4000' has accelerator musa: MindSpore has no MUSA backend",
     "recipe gpt_mindspore's script runs under msrun only, so it cannot run on musa; recipes that can: "),
])
def test_a_launcher_without_musa_is_refused_with_the_way_that_runs(hpclaunch, hpc_home: Path, args: tuple[str, ...],
                                                                    expected: str, hint: str) -> None:
    recipe, *rest = args
    result = hpclaunch("submit", str(REPO / "recipes" / recipe), "--profile", "musa-s4000", *rest, "--dry-run")
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and hint in " ".join(result.stderr.split()), result.stderr
    assert "Traceback" not in result.output
    if recipe == "gpt_mindspore":
        said = " ".join(result.stderr.split())
        assert "bert_large (--set launcher=torchrun --set deepspeed=null)," in said and "gpt2" in said
        assert "mixtral (--preset tp / tp1)" in said
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


def test_the_torchrun_way_on_musa_is_accepted(hpclaunch, hpc_home: Path) -> None:
    for sets in (("--preset", "tp1"), ("--set", "launcher=torchrun", "--set", "deepspeed=null")):
        result = hpclaunch("submit", str(REPO / "recipes" / "mixtral"), "--profile", "musa-s4000", *sets, "--dry-run")
        assert result.exit_code == 0, result.output
