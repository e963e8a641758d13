"""A slow node swapped for the spare inside the allocation, on the real dev Slurm cluster
(docs/troubleshooting.md#stragglers): GPT-2 tiny on 2 nodes with one spare node and rank 1 made 5x slower
(HPCLAUNCH_INJECT=slow:1:2). Node 0's supervisor finds node 1 slow in stragglers.windows=2 windows of
stragglers.window=3 steps in a row (a profile with small settings), the ranks save at the next log step and the
launch is relaunched from that checkpoint on the spare without node 1: one Slurm job, cause `slow`, no step
computed twice, the losses of an uninterrupted run, and the rehearsal's node not a suspect."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.test_recipes_tiny import losses
from tests.integration.test_slurm_launch import (  # noqa: F401
    env,
    hostnames,
    hpclaunch,
    job_hosts,
    needs_slurm,
    submit,
    wait_state,
)

pytestmark = [needs_slurm, pytest.mark.slurm, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
# Node 0 sees the slow windows up to two publishing intervals (30 s) after they end; a slow step takes 5x a normal one
# (0.03 s here at the least: 0.15 s), so the swap comes by step ~210 however fast the machine: the job must outlast it
STEPS = 400
RUN = ("recipes/gpt2", "--preset", "tiny", "--set", "train.log_every=1", "--set", "train.eval_every=0",
       "--set", f"train.max_steps={STEPS}", "--set", "train.save_every=0")


def _profile(tmp_path: Path) -> Path:
    profile = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    profile["name"] = "dev-slurm-swap"
    profile["stragglers"] = {"window": 3, "windows": 2, "max_swaps": 1}
    path = tmp_path / "dev-slurm-swap.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _steps(job: str) -> list[list[str]]:
    """The job's numbered steps (health check, launch, relaunches) with their node lists."""
    out = subprocess.run(["sacct", "-n", "-P", "-j", job, "--format=JobID,State,NodeList"], capture_output=True,
                         text=True, check=True).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    return [r for r in rows if r[0].startswith(f"{job}.") and r[0][len(job) + 1:].isdigit()]


def test_a_slow_node_is_swapped_for_the_spare_at_a_checkpoint_and_the_losses_stay(env, tmp_path):  # noqa: F811
    profile = str(_profile(tmp_path))
    slow = submit({**env, "HPCLAUNCH_INJECT": "slow:1:2"}, *RUN, "--profile", profile, "--layout", "2n1g",
                  "--spare-nodes", "1")
    reference = submit(env, *RUN, "--profile", profile, "--layout", "1n2g")  # the 4th node, at the same time
    job, run_dir = slow["job_id"], Path(slow["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=600)
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert seen[-1] == "COMPLETED", (seen, out[-4000:])
    assert not (run_dir / "retries.jsonl").exists()  # nothing went back to the queue

    (fired,) = [json.loads(line) for line in (run_dir / "progress" / "injected.jsonl").read_text().splitlines()]
    found = json.loads((run_dir / "logs" / "slow.restart-0.json").read_text())
    assert (found["host"], found["rank"], found["action"]) == (fired["host"], 1, "swap"), found
    # judged on windows of steps: 2 whole windows of 3 steps (3-5 and 6-8 at the earliest), all after the injection
    assert found["windows"] == 2 and found["first_step"] > fired["step"] and found["ratio"] >= 1.2, found

    status = json.loads(hpclaunch(env, "status", job, "--json").stdout)
    (rec,) = status["recoveries"]
    allocation = job_hosts(job)  # the launch ran on the first two, the third was the spare
    spare = allocation[2]
    assert (rec["cause"], rec["rank"], rec["node"]) == ("slow", 1, fired["host"]), rec
    assert rec["nodes"].split(",") == [h for h in allocation if h != fired["host"]] and rec["dropped"] == fired["host"]
    assert rec["resumed_step"] >= found["step"], (rec, found)  # the checkpoint the ranks saved at the stop
    saved = [json.loads(line) for line in (run_dir / "checkpoints.jsonl").read_text().splitlines()]
    assert [(c["step"], c["why"], c["restart"]) for c in saved] == [
        (rec["resumed_step"], "signal", 0), (STEPS, "final", 1)], saved
    words = f"{fired['host']} slow for 2 windows ({found['ratio']:.1f}x the median): swapped at step " \
            f"{rec['resumed_step']} for {spare}"
    assert [s["text"] for s in status["slow_nodes"]] == [words], status["slow_nodes"]
    assert f"slow node: {words}" in hpclaunch(env, "status", job).stdout
    assert f"slow node: {words}" in hpclaunch(env, "report", job).stdout
    # watch's row (not a terminal here: one plain line per job) says it too
    assert f" slow {fired['host']}:{found['ratio']:.1f}x:swapped" in hpclaunch(env, "watch", job, "--once").stdout
    steps = _steps(job)
    assert len(steps) == 1 + 2 and fired["host"] not in hostnames(steps[-1][2]), steps  # health, launch, relaunch
    assert spare in hostnames(steps[-1][2])
    # from the slowdown to the first step on the spare, for the record (the target: 2 minutes)
    swapped_in = rec["detected_at"] + rec["seconds_to_first_step"] - fired["t"]
    print(f"slow at step {fired['step']} -> found at step {found['step']} -> swapped at step {rec['resumed_step']}, "
          f"first step on the spare {swapped_in:.1f} s after the slowdown")
    marked = Path(env["HPCLAUNCH_HOME"]) / "suspect-nodes.json"
    assert not marked.exists() or fired["host"] not in json.loads(marked.read_text())  # a rehearsal marks none

    assert wait_state(env, reference["job_id"], ENDED, timeout=600)[-1] == "COMPLETED"
    got, want = losses(run_dir), losses(Path(reference["run_dir"]))
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    for step in want:
        assert abs(got[step] - want[step]) < 1e-5, (step, got[step], want[step])
