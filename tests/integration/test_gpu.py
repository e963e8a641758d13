"""The recipes on a real NVIDIA GPU (profile local-cuda, preset `generated`: full-width architectures,
weights generated from their configs, no network). Marked `gpu`: skipped on a machine without one (the
only tests allowed to skip under HPCLAUNCH_STRICT_SKIPS=1). benchmarks/gpu_recipes.py is the long form
that records the figures in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.test_recipes_tiny import REPO, records

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]
GIB = 2**30


def run(home, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home)})


@pytest.mark.parametrize("recipe,sets", [
    ("gpt2", ()),  # DDP engine, torch.compile, bf16 autocast, micro-batch 16 x 1024 tokens
    ("bert_large", ()),  # DeepSpeed ZeRO-3, bf16
    ("mixtral", ("--set", "model.config.num_hidden_layers=1")),  # seed 000's depth at full width, ZeRO-3
])
def test_a_recipe_trains_on_the_gpu_and_the_plan_holds(tmp_path, recipe: str, sets: tuple[str, ...]) -> None:
    flags = (str(REPO / "recipes" / recipe), "--profile", "local-cuda", "--preset", "generated", *sets,
             "--set", "train.max_steps=30", "--set", "train.log_every=5", "--set", "train.save_every=0")
    plan = run(tmp_path, "plan", *flags, "--json")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout.splitlines()[-1])
    done = run(tmp_path, "submit", *flags, "--follow")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    train = records(run_dir)
    assert train[-1]["step"] == 30 and train[-1]["loss"] < train[0]["loss"]
    assert all(r["mfu"] and 0 < r["mfu"] < 1 for r in train), "MFU from the device's peak (runtime/peaks.py)"
    peak = max(r["peak_mem_bytes"] for r in train) / GIB
    assert peak == pytest.approx(planned["per_device_gib"], rel=0.15), (peak, planned)
