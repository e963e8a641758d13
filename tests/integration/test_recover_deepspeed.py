"""Recovery from node memory under DeepSpeed ZeRO-2 on the real dev Slurm cluster (docs/troubleshooting.md#recovery-
from-a-peer): GPT-2 tiny 2n1g with launcher=deepspeed, a rank killed at step 6; the relaunch inside the job takes
each rank's own ZeRO partition of step 6 from its node's memory (0 steps recomputed, though the newest checkpoint is
step 4) and ends with the losses of an uninterrupted DeepSpeed run beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.runtime.train import peerstore
from tests.integration.test_recipes_tiny import losses
from tests.integration.test_slurm_launch import env, hpclaunch, needs_slurm, submit, wait_state  # noqa: F401

pytestmark = [needs_slurm, pytest.mark.slurm, pytest.mark.slow]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
RUN = ("recipes/gpt2", "--profile", "dev-slurm", "--preset", "tiny", "--layout", "2n1g",
       "--set", "launcher=deepspeed", "--set", "deepspeed.zero_stage=2",
       "--set", "train.log_every=1", "--set", "train.eval_every=0", "--set", "train.max_steps=10",
       "--set", "train.save_every=4", "--set", "watchdog.timeout=45")
FAULT = "kill:1:6"


def test_a_killed_zero2_rank_goes_on_from_every_ranks_partition_in_node_memory(env):  # noqa: F811
    faulty = submit({**env, "HPCLAUNCH_INJECT": FAULT}, *RUN)
    reference = submit(env, *RUN)
    job, run_dir = faulty["job_id"], Path(faulty["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=600)
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert seen[-1] == "COMPLETED", (seen, out[-4000:])
    struck = json.loads((run_dir / "progress" / "injected.jsonl").read_text().splitlines()[0])
    status = json.loads(hpclaunch(env, "status", job, "--json").stdout)
    [rec] = status["recoveries"]
    assert (rec["cause"], rec["rank"], rec["source"]) == ("killed", 1, "peer"), rec
    assert (rec["resumed_step"], rec["recomputed_steps"], rec["checkpoint_step"]) == (struck["step"], 0, 4), rec
    assert status["goodput"]["recomputed_steps"] == 0, status["goodput"]
    resumed = json.loads((run_dir / "progress" / "resumed.restart-1.json").read_text())
    assert resumed["zero_partitions"] == 2 and resumed["fresh_rng_ranks"] == [], resumed
    assert f"resumed from node memory: step {struck['step']}, each of the 2 ranks from its own ZeRO-2 partition" \
        in out, out[-4000:]
    left = peerstore.job_folder(job, run_dir)  # node memory: the ranks gave theirs back at the end
    assert not left.exists() or not list(left.glob("*")), list(left.glob("*"))

    assert wait_state(env, reference["job_id"], ENDED, timeout=600)[-1] == "COMPLETED"
    got, want = losses(run_dir), losses(Path(reference["run_dir"]))
    assert sorted(got) == sorted(want) == list(range(1, 11))
    for step in want:
        assert abs(got[step] - want[step]) < 1e-5, (step, got[step], want[step])
