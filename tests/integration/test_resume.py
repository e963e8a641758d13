"""`hpclaunch resume JOB` with real training: GPT-2 tiny (2 CPU ranks) fails after step 6 (HPCLAUNCH_INJECT
crashes a rank; it fires in a job's first run only), having saved a checkpoint at step 4; the resumed job goes
on from step 4 in the same run directory, its logs those of restart 1, and ends with the losses of an
uninterrupted run. On the local profile, and on the dev Slurm cluster without the node the first job ran on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_recipes_tiny import losses
from tests.integration.test_slurm_launch import needs_slurm, wait_state

REPO = Path(__file__).resolve().parents[2]
RUN = ("--preset", "tiny", "--set", "train.max_steps=8", "--set", "train.log_every=1", "--set",
       "train.save_every=4", "--set", "train.eval_steps=2")
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _cli(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=600)
    assert not check or proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _submit(env: dict[str, str], *args: str, inject: str | None = None) -> tuple[str, Path]:
    env = {**env, "HPCLAUNCH_INJECT": inject} if inject else env
    done = json.loads(_cli(env, "submit", str(REPO / "recipes" / "gpt2"), *args, *RUN, "--json").stdout)
    return done["job_id"], Path(done["run_dir"])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "HPCLAUNCH_INJECT"} | {"HPCLAUNCH_HOME": str(tmp_path)}


def _check_resumed(env: dict[str, str], old: str, new: str, run_dir: Path) -> None:
    """The new job went on from step 4 as restart 1 of the same run directory, and says so in status and jobs."""
    assert "resumed from" in (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    assert "at step 4" in (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    assert (run_dir / "logs" / "rank-0.restart-0.log").is_file()  # the failed run's logs are kept apart
    assert f"resumed: {old} -> {new} (COMPLETED) from its checkpoint at step 4" in _cli(env, "status", old).stdout
    jobs = {row["job_id"]: row for row in json.loads(_cli(env, "jobs", "--json").stdout)}
    assert jobs[new]["resumes"]["job"] == old and jobs[new]["run_dir"] == str(run_dir)
    assert jobs[old]["latest"]["state"] == "COMPLETED"


@pytest.mark.slow
def test_a_failed_job_resumed_on_the_local_profile_gives_the_uninterrupted_losses(env):
    reference, ref_dir = _submit(env, "--profile", "local")
    old, run_dir = _submit(env, "--profile", "local", inject="crash:0:6")
    assert wait_state(env, reference, ENDED, timeout=300)[-1] == "COMPLETED"
    assert wait_state(env, old, ENDED, timeout=300)[-1] == "FAILED"
    assert sorted(losses(run_dir)) == [1, 2, 3, 4, 5, 6]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-00000004"]

    resumed = _cli(env, "resume", old, "--follow")
    assert f"resumed job {old} (FAILED) as job " in resumed.stdout, resumed.stdout
    new = resumed.stdout.split(" as job ", 1)[1].split(",", 1)[0]
    assert f"from its checkpoint at step 4 ({run_dir / 'checkpoints' / 'step-00000004'}), restart 1" in resumed.stdout
    _check_resumed(env, old, new, run_dir)
    got, want = losses(run_dir), losses(ref_dir)
    assert sorted(got) == sorted(want) == list(range(1, 9))
    for step in want:  # steps 5 and 6 ran twice: the resumed run's (written last) are the uninterrupted ones
        assert abs(got[step] - want[step]) < 1e-6, (step, got[step], want[step])


@needs_slurm
@pytest.mark.slurm
@pytest.mark.slow
def test_a_failed_job_resumed_on_the_dev_cluster_without_its_node(env, backend):
    env = backend.env(env)
    old, run_dir = _submit(env, *backend.args, "--layout", "1n2g", inject="crash:1:6")
    assert wait_state(env, old, ENDED, timeout=300)[-1] == "FAILED"
    first_node = json.loads(_cli(env, "status", old, "--json").stdout)["nodes"]
    assert first_node and "," not in first_node

    resumed = json.loads(_cli(env, "resume", old, "--exclude", first_node, "--json").stdout)
    new = resumed["job_id"]
    link = resumed["resumes"]
    assert (link["job"], link["step"], link["restart"]) == (old, 4, 1), resumed
    assert wait_state(env, new, ENDED, timeout=300)[-1] == "COMPLETED", (run_dir / "logs" / f"job.{new}.out")
    ran_on = json.loads(_cli(env, "status", new, "--json").stdout)["nodes"]
    assert ran_on and ran_on != first_node
    _check_resumed(env, old, new, run_dir)
    assert sorted(losses(run_dir)) == list(range(1, 9))
