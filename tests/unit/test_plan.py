"""The memory plan (hpclaunch/plan/, `hpclaunch plan`, preflight's fit check) on the real model configs.

The published config.json of each full-size model (tests/fixtures/configs/) is put into a temporary asset
store that copies of the bundled profiles point at (scripts/preset_table.py's `fixture_profiles`), so the
plans below are those of the real models, built on the meta device, on every bundled profile.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
GIB = float(1 << 30)


preset_table = load_script("preset_table")
PROFILES = sorted(p.stem for p in (REPO / "cluster_profiles").glob("*.yaml"))

# (recipe, preset, published parameter count of the model the recipe trains)
GOLDEN = [
    ("gpt2", "full", 124_439_808),  # GPT-2 124M
    ("gpt2", "medium", 354_823_168),  # GPT-2 355M
    ("gpt2", "large", 774_030_080),  # GPT-2 774M
    ("gpt2", "xl", 1_557_611_200),  # GPT-2 1.5B
    ("bert_large", "full", 335_174_458),  # BERT-large 335M (BertForMaskedLM: no pooler, the MLM head)
    ("mixtral", "full", 46_702_792_704),  # Mixtral-8x7B 46.7B
]


@pytest.fixture
def staged(hpc_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The bundled profiles with the fixture configs staged; a fresh plan cache under tmp_path."""
    from hpclaunch.plan import model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(model, "_MEMO", {})
    with preset_table.fixture_profiles() as store:
        yield store


def _plan(hpclaunch: Callable[..., Result], *args: str) -> dict[str, Any]:
    result = hpclaunch("plan", *args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _layout_on(profile: str, recipe: str, preset: str) -> list[str] | None:
    """The preset's own layout, or one full node of the profile's default partition for an hour where the
    preset asks for more than the partition allows (V100 nodes of 4, the dev cluster's 1 node and 2 hours); None
    where the profile refuses the recipe's launcher (DeepSpeed on MUSA)."""
    from hpclaunch.errors import ConfigError, LimitError
    from hpclaunch.submission.resolve import CliOverrides, resolve

    try:
        resolve(recipe, profile, CliOverrides(preset=preset))
        return []
    except LimitError:
        data = yaml.safe_load((REPO / "cluster_profiles" / f"{profile}.yaml").read_text())
        gpus = data["partitions"][data["default_partition"]]["gpus_per_node"]
        return ["--layout", f"1n{gpus}g", "--set", "time=01:00:00"]
    except ConfigError as exc:
        if "no MUSA accelerator" in exc.message:
            return None
        raise


@pytest.mark.parametrize(("recipe", "preset", "params"), GOLDEN, ids=[f"{r}-{p}" for r, p, _ in GOLDEN])
def test_full_presets_have_the_published_parameter_counts_on_every_profile(
        staged: Path, hpclaunch: Callable[..., Result], recipe: str, preset: str, params: int) -> None:
    for profile in PROFILES:
        layout = _layout_on(profile, recipe, preset)
        if layout is None:
            refused = hpclaunch("plan", recipe, "--profile", profile, "--preset", preset)
            assert refused.exit_code == 2 and "DeepSpeed has no MUSA accelerator" in refused.stderr, profile
            continue
        result = hpclaunch("plan", recipe, "--profile", profile, "--preset", preset, *layout, "--json")
        assert result.exit_code == 0, f"{profile}: {result.output}"
        plan = json.loads(result.stdout)
        assert plan["params"] == params, profile
        gpu_gb = yaml.safe_load((REPO / "cluster_profiles" / f"{profile}.yaml").read_text())["partitions"]
        has_memory = any(p.get("gpu_memory_gb") for p in gpu_gb.values())
        assert (plan["fits"] is None) == (not has_memory), profile
        assert plan["per_device_gib"] == pytest.approx(
            plan["model_states_gib"] + plan["activations_gib"] + plan["buffers_gib"] + plan["reserve_gib"], abs=0.01)


def test_mixtral_8x7b_zero3_fits_32_a800s_and_not_8(staged: Path, hpclaunch: Callable[..., Result]) -> None:
    # issue 9: 46.7 B parameters x 16 bytes (bf16 weights and grads, fp32 master and AdamW moments)
    wide = _plan(hpclaunch, "mixtral", "--profile", "guangzhou-a800", "--preset", "full")
    assert (wide["layout"], wide["zero_stage"], wide["precision"]) == ("4n8g", 3, "bf16")
    assert wide["model_states_gib"] == pytest.approx(46_702_792_704 * 16 / 32 / GIB, rel=1e-3)
    assert wide["model_states_gib"] == pytest.approx(21.7, abs=0.1)
    assert wide["fits"] is True and wide["per_device_gib"] < wide["device_gib"] == 80
    # one checkpoint: bf16 weights 2 + fp32 master 4 + moments 8 bytes per parameter, for the whole job
    assert wide["checkpoint_gib"] == pytest.approx(46_702_792_704 * 14 / GIB, rel=1e-3)
    assert wide["checkpoint_gib"] == pytest.approx(609, abs=1)
    one_node = _plan(hpclaunch, "mixtral", "--profile", "guangzhou-a800", "--preset", "full", "--layout", "1n8g")
    assert one_node["model_states_gib"] == pytest.approx(87.0, abs=0.1)
    assert one_node["fits"] is False and one_node["suggestions"]


def test_json_has_the_documented_keys(staged: Path, hpclaunch: Callable[..., Result]) -> None:
    plan = _plan(hpclaunch, "gpt2", "--profile", "guangzhou-a800")
    for key in ("fits", "params", "model_states_gib", "activations_gib", "per_device_gib", "device_gib",
                "suggestions", "tokens_per_step"):
        assert key in plan, key
    assert plan["fits"] is True and plan["suggestions"] == []
    assert plan["tokens_per_step"] == 128 * 1024  # global batch 16 x 8 of 1024 tokens
    text = hpclaunch("plan", "gpt2", "--profile", "guangzhou-a800")
    assert text.exit_code == 0 and "124.44 M" in text.stdout and "fits" in text.stdout


@pytest.mark.parametrize("args", [
    ("mixtral", "--profile", "guangzhou-a800", "--preset", "full", "--layout", "1n8g"),  # ZeRO-3 on too few
    ("gpt2", "--profile", "cngrid12-v100", "--preset", "xl", "--layout", "1n4g"),  # DDP 1.5B on 16 GB V100s
    ("bert_large", "--profile", "cngrid12-v100", "--preset", "v100", "--set", "train.micro_batch_size=64",
     "--set", "train.grad_accum=2"),  # activations
], ids=["mixtral-1n8g", "gpt2-xl-v100", "bert-v100-mb64"])
def test_suggestions_fit_when_applied(staged: Path, hpclaunch: Callable[..., Result], args: tuple[str, ...]) -> None:
    plan = _plan(hpclaunch, *args)
    assert plan["fits"] is False and plan["suggestions"], plan
    for suggestion in plan["suggestions"]:
        again = _plan(hpclaunch, *args, *shlex.split(suggestion["change"]))
        assert again["fits"] is True, (suggestion, again["per_device_gib"])
        assert again["per_device_gib"] == pytest.approx(suggestion["per_device_gib"], abs=0.01), suggestion
        assert again["layout"] == suggestion["layout"]
        if "train.grad_accum" in suggestion["change"]:  # more accumulation: at the same global batch
            assert again["global_batch"] == plan["global_batch"], suggestion


def test_second_plan_reads_the_cached_model_facts(staged: Path, hpclaunch: Callable[..., Result],
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpclaunch.plan import model

    first = _plan(hpclaunch, "gpt2", "--profile", "guangzhou-a800", "--preset", "medium")
    cached = list((tmp_path / "cache" / "hpclaunch" / model.CACHE_KIND).glob("*.json"))
    assert len(cached) == 1
    facts = json.loads(cached[0].read_text())
    assert facts["params"] == first["params"] == 354_823_168
    # a later process (no in-memory memo) plans from the file, not from a model built again: it reports
    # what the file says
    facts["params"] = 123
    cached[0].write_text(json.dumps(facts))
    monkeypatch.setattr(model, "_MEMO", {})
    second = _plan(hpclaunch, "gpt2", "--profile", "guangzhou-a800", "--preset", "medium")
    assert second["params"] == 123
    assert len(list(cached[0].parent.glob("*.json"))) == 1


def _tiny_profile(tmp_path: Path, gpu_memory_gb: float) -> Path:
    """The local profile (ranks are local processes) with device memory to check against."""
    data = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    data["partitions"]["local"]["gpu_memory_gb"] = gpu_memory_gb
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _model_recipe(tmp_path: Path) -> Path:
    """The allreduce test recipe (seconds on CPU) with a tiny generated GPT-2 to plan."""
    folder = tmp_path / "allreduce_model"
    shutil.copytree(REPO / "tests" / "fixtures" / "recipes" / "allreduce", folder)
    data = yaml.safe_load((folder / "recipe.yaml").read_text())
    data["model"] = {"source": "generate", "model_type": "gpt2",
                     "config": {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 128, "vocab_size": 1024}}
    data["train"] = {"micro_batch_size": 8, "seq_len": 128}
    (folder / "recipe.yaml").write_text(yaml.safe_dump(data))
    return folder


def _run_dirs(hpc_home: Path) -> list[Path]:
    runs = hpc_home / "runs"
    return [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []


def test_preflight_warns_on_a_dry_run_and_refuses_a_submit(
        hpc_home: Path, hpclaunch: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    recipe, profile = str(_model_recipe(tmp_path)), str(_tiny_profile(tmp_path, 0.25))
    plan = _plan(hpclaunch, recipe, "--profile", profile)
    assert plan["fits"] is False and plan["device_gib"] == 0.25
    total = f"{plan['per_device_gib']:.1f}"

    dry = hpclaunch("submit", recipe, "--profile", profile, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "plan: " in dry.stderr and f"{total} of 0.25 GiB per device" in dry.stderr and "does NOT fit" in dry.stderr
    assert "warning:" in dry.stderr and f"needs {total} GiB per device" in dry.stderr
    before = _run_dirs(hpc_home)

    refused = hpclaunch("submit", recipe, "--profile", profile)
    assert refused.exit_code == 2, refused.output
    assert f"needs {total} GiB per device on 1n2g" in refused.stderr and "have 0.25 GiB" in refused.stderr
    assert "--skip-fit-check" in refused.stderr and "Traceback" not in refused.output
    assert _run_dirs(hpc_home) == before  # nothing written
    # the details command of the hint, pasted, plans this very job (the recipe and profile as files)
    details = refused.stderr.split("details: ", 1)[1].split("; queue it anyway", 1)[0]
    assert details == f"hpclaunch plan {recipe} --profile {profile} --layout 1n2g --partition local"
    assert _plan(hpclaunch, *shlex.split(details)[2:])["per_device_gib"] == plan["per_device_gib"]

    fits = hpclaunch("submit", recipe, "--profile", str(_tiny_profile(tmp_path, 80)), "--dry-run")
    assert fits.exit_code == 0 and ": fits" in fits.stderr and "warning" not in fits.stderr

    let_through = hpclaunch("submit", recipe, "--profile", profile, "--skip-fit-check", "--json")
    assert let_through.exit_code == 0, let_through.output
    job = json.loads(let_through.stdout)
    assert Path(job["run_dir"]).is_dir() and job["job_id"]
    hpclaunch("cancel", job["job_id"])


def test_the_preset_table_in_the_docs_is_current(hpc_home: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    doc = preset_table.doc_table(preset_table.DOC.read_text(encoding="utf-8"))
    assert doc == preset_table.table(), "docs/recipes.md is stale: run python scripts/preset_table.py --write"
    assert "| `mixtral` | `full` | guangzhou-a800 | 4n8g | DeepSpeed ZeRO-3, bf16 |" in doc


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB filesystem (tmpfs, mounted as root) to put a run root on."""
    import subprocess

    where = tmp_path / "small-fs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_checkpoints_that_cannot_fit_the_run_root_are_refused_with_the_numbers(
        hpc_home: Path, hpclaunch: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        small_filesystem: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    recipe = str(_model_recipe(tmp_path))
    data = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    data["run_root"] = str(small_filesystem / "runs")
    profile = tmp_path / "small-disk.yaml"
    profile.write_text(yaml.safe_dump(data))
    one = _plan(hpclaunch, recipe, "--profile", str(profile))["checkpoint_gib"]
    assert one > 0
    refused = hpclaunch("submit", recipe, "--profile", str(profile))
    assert refused.exit_code == 2, refused.output
    import re

    # the recipe saves only at its end: that checkpoint and one at a time limit can be on disk at once
    said = re.search(r"checkpoints need ([\d.]+) MiB \(2 saves at most: the final one and one at a time limit, "
                     r"([\d.]+) MiB each", refused.stderr)
    assert said, refused.stderr  # a tiny model: said in MiB, as the plan counts it (--json rounds to 0.001 GiB)
    assert float(said.group(1)) == pytest.approx(2 * float(said.group(2)), abs=0.15)
    assert float(said.group(2)) == pytest.approx(one * 1024, abs=0.6)
    assert f"the free space on {small_filesystem}" in refused.stderr and "run_root" in refused.stderr
    assert not (small_filesystem / "runs").exists() or not any((small_filesystem / "runs").iterdir())
    dry = hpclaunch("submit", recipe, "--profile", str(profile), "--dry-run")
    assert dry.exit_code == 0 and "warning:" in dry.stderr and "checkpoints need" in dry.stderr


@pytest.mark.parametrize("max_steps,save_every,count", [(5000, 1000, 3), (100, 0, 2), (100, 60, 3), (100, 200, 2)])
def test_the_checkpoints_on_disk_at_once_follow_the_saves(max_steps: int, save_every: int, count: int) -> None:
    """Preflight's room check counts the checkpoints a run can hold at once: 2 kept + 1 being written, or fewer
    when it saves fewer (a run that saves only at its end: that one, and one at a time limit)."""
    from types import SimpleNamespace

    from hpclaunch.submission.space import at_once

    spec = SimpleNamespace(recipe=SimpleNamespace(train=SimpleNamespace(max_steps=max_steps, save_every=save_every)))
    got, why = at_once(spec)  # type: ignore[arg-type]
    assert got == count
    assert ("2 kept + 1 being written" in why) == (count == 3)
