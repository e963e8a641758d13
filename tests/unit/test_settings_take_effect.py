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
    (("gpt2", "--preset", "generated", "--set", "launcher=deepspeed"),
     "train.compile: torch.compile is applied by the torch engine"),
    (("gpt2", "--preset", "tiny", "--set", "parallel.model_parallel=4"),
     "a parallel section (MindSpore's data/model/pipeline parallel) needs launcher: msrun"),
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
                         ("gpt2", ("--set", "launcher=deepspeed", "--set", "train.compile=false"))):
        result = hpclaunch("submit", str(REPO / "recipes" / recipe), "--profile", "local", "--preset", "tiny",
                           *sets, "--dry-run")
        assert result.exit_code == 0, result.output
