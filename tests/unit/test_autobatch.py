"""`--set train.micro_batch_size=auto` (hpclaunch/submission/autobatch.py): the largest micro-batch the memory plan
says fits the partition's devices within the profile's margin, the recipe's global batch kept by accumulation.

Checked on the plan's goldens (the published configs of Mixtral-8x7B and BERT-large on guangzhou-a800's 80 GiB
A800s): the value chosen, that the plan at the chosen value is within the limit and at one more is not, and on a
real tiny job (local profile) whose log says what was chosen.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from tests.fixtures.jobrecords import wait_local
from tests.unit import test_plan
from tests.unit.test_plan import _plan, staged  # noqa: F401  (the fixture: the goldens' configs staged)

REPO = Path(__file__).resolve().parents[2]
LIMIT_A800 = 80 * 0.9  # GiB: guangzhou-a800's devices less the default 10 % margin
AUTO = ("--set", "train.micro_batch_size=auto")

@pytest.mark.usefixtures("staged")
def test_mixtral_chooses_the_largest_micro_batch_within_the_margin(hpclaunch: Callable[..., Result]) -> None:
    # a global batch of 768 on 32 devices: 24 per replica, so every micro-batch up to 24 keeps it
    mixtral = ("mixtral", "--profile", "guangzhou-a800", "--preset", "full")
    plan = _plan(hpclaunch, *mixtral, *AUTO, "--set", "train.global_batch_size=768")
    auto = plan["micro_batch_auto"]
    assert (plan["micro_batch"], plan["grad_accum"], plan["global_batch"]) == (auto["micro_batch"], 1, 768)
    assert auto["micro_batch"] == auto["fits_up_to"] == 24
    assert plan["per_device_gib"] <= LIMIT_A800 and auto["limit_gib"] == pytest.approx(LIMIT_A800)
    one_more = _plan(hpclaunch, *mixtral, "--set", "train.micro_batch_size=25", "--set", "train.global_batch_size=800")
    assert one_more["per_device_gib"] > LIMIT_A800 and one_more["per_device_gib"] == auto["next_gib"]

    # the recipe's own global batch (32 on 32 devices) leaves one sample per replica: micro-batch 1
    own = _plan(hpclaunch, *mixtral, *AUTO)["micro_batch_auto"]
    assert (own["micro_batch"], own["grad_accum"], own["global_batch"]) == (1, 1, 32) and own["next_gib"] < LIMIT_A800


@pytest.mark.usefixtures("staged")
def test_the_choice_divides_the_share_of_each_replica(hpclaunch: Callable[..., Result]) -> None:
    # 2048 on 32 devices = 64 per replica: 24 fits, 25 does not, and the largest divisor of 64 within it is 16
    mixtral = ("mixtral", "--profile", "guangzhou-a800", "--preset", "full")
    plan = _plan(hpclaunch, *mixtral, *AUTO, "--set", "train.global_batch_size=2048")
    auto = plan["micro_batch_auto"]
    assert (auto["fits_up_to"], auto["micro_batch"], auto["grad_accum"]) == (24, 16, 4)
    assert plan["micro_batch"] * plan["grad_accum"] * plan["data_parallel"] == plan["global_batch"] == 2048
    assert auto["next_gib"] > LIMIT_A800


@pytest.mark.usefixtures("staged")
def test_bert_large_keeps_its_global_batch(hpclaunch: Callable[..., Result]) -> None:
    bert = ("bert_large", "--profile", "guangzhou-a800", "--preset", "full")
    # its own 512 on 8 devices (8 x 8 x 8): 64 per replica fits at once
    plan = _plan(hpclaunch, *bert, *AUTO)
    assert (plan["micro_batch"], plan["grad_accum"], plan["global_batch"]) == (64, 1, 512)
    assert plan["per_device_gib"] <= LIMIT_A800
    # 8192 (1024 per replica): the memory decides
    big = ("--set", "train.grad_accum=null", "--set", "train.global_batch_size=8192")
    auto = _plan(hpclaunch, *bert, *AUTO, *big)["micro_batch_auto"]
    up_to = auto["fits_up_to"]
    assert 64 < up_to < 1024 and auto["micro_batch"] == max(d for d in range(1, up_to + 1) if 1024 % d == 0)
    one_more = _plan(hpclaunch, *bert, "--set", f"train.micro_batch_size={up_to + 1}", "--set", "train.grad_accum=1",
                     "--set", f"train.global_batch_size={8 * (up_to + 1)}")
    assert one_more["per_device_gib"] > LIMIT_A800 and one_more["fits"] is True  # over the margin, not the device
    at = _plan(hpclaunch, *bert, "--set", f"train.micro_batch_size={up_to}", "--set", "train.grad_accum=1",
               "--set", f"train.global_batch_size={8 * up_to}")
    assert at["per_device_gib"] <= LIMIT_A800


def _run_dirs(hpc_home: Path) -> list[Path]:
    runs = hpc_home / "runs"
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []


@pytest.mark.usefixtures("staged")
def test_nothing_fits_exits_2_with_the_numbers(hpc_home: Path, hpclaunch: Callable[..., Result]) -> None:
    before = _run_dirs(hpc_home)
    for command in ("submit", "plan"):
        result = hpclaunch(command, "mixtral", "--profile", "guangzhou-a800", "--preset", "full", "--layout", "1n8g",
                           *AUTO, *(["--dry-run"] if command == "submit" else []))
        assert result.exit_code == 2, result.output
        assert "not even micro-batch 1 fits: the plan needs 98.0 GiB per device on 1n8g" in result.stderr
        assert "the limit is 72.0 GiB (80 GiB of partition 'gpu' - 10% margin" in result.stderr
        assert "Traceback" not in result.output
    assert _run_dirs(hpc_home) == before


def _profile(tmp_path: Path, **partition: Any) -> Path:
    data = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    data["partitions"]["local"].update(partition)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _model_recipe(tmp_path: Path) -> Path:
    """test_plan's recipe (allreduce, seconds on CPU, with a tiny generated GPT-2 to plan), global batch 64."""
    folder = test_plan._model_recipe(tmp_path)
    data = yaml.safe_load((folder / "recipe.yaml").read_text())
    data["train"] = {"micro_batch_size": 4, "grad_accum": 8, "seq_len": 128}
    (folder / "recipe.yaml").write_text(yaml.safe_dump(data))
    return folder


def test_a_partition_without_device_memory_is_refused(hpc_home: Path, hpclaunch: Callable[..., Result],
                                                     tmp_path: Path) -> None:
    result = hpclaunch("submit", str(_model_recipe(tmp_path)), "--profile", "local", *AUTO, "--dry-run")
    assert result.exit_code == 2 and "does not give gpu_memory_gb" in result.stderr, result.output
    assert _run_dirs(hpc_home) == []


def test_a_real_tiny_job_says_what_was_chosen(hpc_home: Path, hpclaunch: Callable[..., Result],
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    recipe, profile = str(_model_recipe(tmp_path)), str(_profile(tmp_path, gpu_memory_gb=1.0))
    dry = hpclaunch("submit", recipe, "--profile", profile, *AUTO, "--dry-run")
    assert dry.exit_code == 0, dry.output
    line = next(x for x in dry.stderr.splitlines() if "micro-batch auto:" in x)
    assert "keeps global batch 64" in line and "of 0.9 GiB (1 GiB - 10% margin)" in line
    echo = next(x for x in dry.stdout.splitlines() if "micro-batch auto:" in x)  # the script echoes it to the log
    assert shlex.split(echo) == ["echo", line]

    job = json.loads(hpclaunch("submit", recipe, "--profile", profile, *AUTO, "--json").stdout)
    spec = yaml.safe_load((Path(job["run_dir"]) / "resolved.yaml").read_text())
    auto = spec["micro_batch_auto"]
    assert spec["sets"] == ["train.micro_batch_size=auto"]
    assert spec["recipe"]["train"]["micro_batch_size"] == auto["micro_batch"] == 32  # 64 on 2 ranks, all of it fits
    assert spec["grad_accum"] == auto["grad_accum"] == 1 and spec["global_batch_size"] == 64
    assert wait_local(job["job_id"], timeout=180) == "COMPLETED"
    log = hpclaunch("logs", job["job_id"])
    assert "hpclaunch: micro-batch auto: 32 x accumulation 1 keeps global batch 64" in log.stdout, log.output


def test_the_profile_margin_decides(hpc_home: Path, hpclaunch: Callable[..., Result], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    recipe = str(_model_recipe(tmp_path))

    def chosen(margin: float, gib: float) -> dict[str, Any]:
        path = _profile(tmp_path, gpu_memory_gb=gib)
        data = yaml.safe_load(path.read_text())
        data["defaults"]["memory_margin"] = margin
        path.write_text(yaml.safe_dump(data))
        plan = _plan(hpclaunch, recipe, "--profile", str(path), *AUTO)
        assert plan["per_device_gib"] <= gib * (1 - margin)
        return dict(plan["micro_batch_auto"])

    # the tiny GPT-2 plans 0.51 GiB per device at micro-batch 1 (the CPU runtime's 0.5), 0.63 at 32
    roomy, tight = chosen(0.1, 0.68), chosen(0.2, 0.68)
    assert tight["limit_gib"] == pytest.approx(0.544) and 1 < tight["fits_up_to"] < roomy["fits_up_to"] < 32
    assert tight["next_gib"] > 0.544 and roomy["next_gib"] > 0.612
