"""Tensor x data parallel on CPU (4 gloo ranks, the `local` profile): recipes/mixtral's `tp` preset (2 ranks per
replica x 2 replicas, torchrun) against `tp1` (the same run as DDP over 4 ranks, the same global batch).

What a user checks: the two give the same losses to 1e-4; each rank holds half of every weight the model's
tp_plan splits, and the two tensor-parallel ranks' halves put together are the DDP run's trained weights; the
job's metrics count the tokens of the replicas, not of the ranks; a run stopped after step 4 and restarted
resumes from its per-rank shards and gives the uninterrupted losses.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
MAX_STEPS = 8


def submit(home: Path, preset: str, env: dict | None = None) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "hpclaunch.cli.main", "submit", str(REPO / "recipes" / "mixtral"), "--profile",
         "local", "--preset", preset, "--follow"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HPCLAUNCH_HOME": str(home), **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    assert run_dir, proc.stdout
    return Path(run_dir.group(1))


def records(run_dir: Path, kind: str, rank: int = 0) -> list[dict]:
    lines = (run_dir / "metrics" / f"rank-{rank}.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run_dir, "train")}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hpclaunch-home")


@pytest.fixture(scope="module")
def tp(home) -> Path:
    return submit(home, "tp")


@pytest.fixture(scope="module")
def ddp(home) -> Path:
    return submit(home, "tp1")


def test_tp2_x_dp2_gives_the_losses_of_ddp_over_4_ranks(tp, ddp):
    """Near 30 s: 4 ranks of tensor x data parallel and a 4-rank DDP reference."""
    assert "tensor parallel 2 x data parallel 2" in (tp / "logs" / "rank-0.restart-0.log").read_text()
    a, b = losses(tp), losses(ddp)
    assert sorted(a) == sorted(b) == list(range(1, MAX_STEPS + 1))
    for step in a:
        assert abs(a[step] - b[step]) < 1e-4, (step, a[step], b[step])
    assert a[MAX_STEPS] < a[1]  # it learns
    (ea,), (eb,) = records(tp, "eval"), records(ddp, "eval")
    assert abs(ea["eval_loss"] - eb["eval_loss"]) < 1e-4
    # tokens per step are those of the 2 replicas: the same global batch (16 x 64 tokens) as DDP's 4 ranks
    first = records(tp, "train")[0]
    assert first["world_size"] == 4 and first["tensor_parallel"] == 2


def test_each_rank_holds_half_of_every_split_weight(tp, ddp):
    for rank in range(4):
        (model,) = records(tp, "model", rank)
        assert model["tensor_parallel"] == 2
        assert model["sharded_param_bytes"] > 0.9 * model["param_bytes"]  # attention, experts, embeddings, head
        assert 2 * model["held_sharded_bytes"] == model["sharded_param_bytes"]
        assert model["held_param_bytes"] < 0.55 * model["param_bytes"]
    final = f"step-{MAX_STEPS:08d}"
    whole = torch.load(ddp / "checkpoints" / final / "state.pt", weights_only=False)["model"]
    halves = [torch.load(tp / "checkpoints" / final / f"tp-rank-{r:05d}.pt", weights_only=False) for r in (0, 1)]
    assert [h["layout"] for h in halves] == [{"world_size": 4, "tensor_parallel": 2}] * 2
    for layer in (0, 1):
        # column-wise (output rows split) and row-wise (input columns split) projections of attention
        for name, dim in (("q_proj", 0), ("k_proj", 0), ("v_proj", 0), ("o_proj", 1)):
            key = f"model.layers.{layer}.self_attn.{name}.weight"
            parts = [h["model"][key] for h in halves]
            assert all(2 * p.numel() == whole[key].numel() for p in parts), key
            torch.testing.assert_close(torch.cat(parts, dim=dim), whole[key], atol=1e-4, rtol=0)
        for expert in ("gate_up_proj", "down_proj"):
            key = f"model.layers.{layer}.mlp.experts.{expert}"
            assert 2 * halves[0]["model"][key].numel() == whole[key].numel(), key
        key = f"model.layers.{layer}.input_layernorm.weight"  # norms are replicated, whole on every rank
        torch.testing.assert_close(halves[0]["model"][key], whole[key], atol=1e-4, rtol=0)


def test_tp_run_stopped_and_restarted_gives_the_uninterrupted_losses(home, tp):
    run_dir = submit(home, "tp", env={"HPCLAUNCH_STOP_AT_STEP": "4"})
    assert sorted(losses(run_dir)) == [1, 2, 3, 4]
    env = {k: v for k, v in os.environ.items() if k != "HPCLAUNCH_STOP_AT_STEP"}
    env.update(HPCLAUNCH_JOB_ID="requeued", HPCLAUNCH_RESTART="1", HPCLAUNCH_HOME=str(home))
    proc = subprocess.run(["bash", str(run_dir / "job.sbatch")], cwd=run_dir, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resumed from" in (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    resumed, reference = losses(run_dir), losses(tp)
    assert sorted(resumed) == list(range(1, MAX_STEPS + 1))
    for step in reference:
        assert abs(resumed[step] - reference[step]) < 1e-5, (step, resumed[step], reference[step])


def test_plan_model_states_equal_the_bytes_each_tp_rank_holds(tp):
    """The memory plan under tensor parallelism (hpclaunch/plan/memory.py) against the parameter, gradient and
    AdamW bytes each rank holds after its first step (hpclaunch/runtime/train/held.py), within 5 %."""
    from hpclaunch.plan import plan_job
    from hpclaunch.submission.resolve import CliOverrides, resolve

    plan = plan_job(resolve(str(REPO / "recipes" / "mixtral"), "local", CliOverrides(preset="tp")))
    assert plan.setup.tensor_parallel == 2
    for rank in range(4):
        (held,) = records(tp, "states", rank)
        measured = held["param_bytes"] + held["grad_bytes"] + held["optimizer_bytes"]
        assert measured == pytest.approx(plan.estimate.model_states, rel=0.05), (rank, held, plan.estimate)
