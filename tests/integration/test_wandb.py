"""W&B, as a user meets it: a tiny GPT-2 job with `tracking.wandb.project` set writes W&B offline runs into its run
directory (no network from the job), a restart adds one with the same run id, and `hpclaunch sync` uploads both
as one run to a W&B server (tests/fixtures/wandbserver: a loopback server answering what `wandb sync` asks of
api.wandb.ai), with the losses of the metrics JSON lines; a second sync uploads nothing; without credentials sync
fails and says how to log in. `mode: online` streams to the server from the job itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.runtime.train.tracking import wandb_run_id
from hpclaunch.state.runfiles import RunFiles
from tests.fixtures.wandbserver.server import WandbServer
from tests.integration.test_recipes_tiny import QUICK, losses, submit

pytestmark = pytest.mark.slow
KEY = "k" * 40


def _cli(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HPCLAUNCH_HOME": str(home), **(env or {})})


def _history(run) -> dict[int, dict]:
    return {h["_step"]: h for h in run.history}


@pytest.fixture(scope="module")
def stopped_and_restarted(tmp_path_factory) -> tuple[Path, Path]:
    """gpt2 tiny, 6 steps, W&B offline: stopped at step 3 (as on a preemption warning), then restarted."""
    home = tmp_path_factory.mktemp("wandb-home")
    run_dir = submit(home, "gpt2", "--set", "train.max_steps=6", "--set", "tracking.wandb.project=hl-test",
                     "--set", "tracking.wandb.group=cpu", *QUICK, env={"HPCLAUNCH_STOP_AT_STEP": "3"})
    env = {k: v for k, v in os.environ.items() if k != "HPCLAUNCH_STOP_AT_STEP"}
    env.update(HPCLAUNCH_JOB_ID="requeued", HPCLAUNCH_RESTART="1", HPCLAUNCH_HOME=str(home))
    proc = subprocess.run(["bash", str(run_dir / "job.sbatch")], cwd=run_dir, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return home, run_dir


def test_offline_runs_of_a_restarted_job_upload_as_one_run_with_the_metrics_losses(stopped_and_restarted):
    home, run_dir = stopped_and_restarted
    segments = RunFiles(run_dir).wandb_offline_runs()
    run_id = wandb_run_id(run_dir)
    assert len(segments) == 2 and all(p.name.endswith(f"-{run_id}") for p in segments), segments
    assert "W&B run" in (run_dir / "logs" / "rank-0.restart-0.log").read_text()

    with WandbServer() as wb:
        env = {"WANDB_BASE_URL": wb.url, "WANDB_API_KEY": KEY}
        dry = _cli(home, "sync", str(run_dir), "--dry-run", "--json", env=env)
        assert dry.returncode == 0, dry.stderr
        (job,) = json.loads(dry.stdout)["jobs"]
        assert [s["upload"] for s in job["segments"]] == [True, True] and job["wandb_runs"] == [run_id]
        assert not wb.runs, "a dry run uploaded something"

        first = _cli(home, "sync", str(run_dir), env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "uploaded 2 offline W&B run(s)" in first.stdout
        assert list(wb.runs) == [f"hl-test/{run_id}"] and wb.auth == {KEY}
        run = wb.runs[f"hl-test/{run_id}"]
        assert run.display_name == "gpt2" and run.group == "cpu" and run.complete and run.exitcode == 0
        assert run.config["recipe"]["train"]["max_steps"] == 6 and run.config["profile"] == "local"
        history, metrics = _history(run), losses(run_dir)
        train_steps = sorted(s for s, h in history.items() if "train/loss" in h)
        assert train_steps == sorted(metrics) == [1, 2, 3, 4, 5, 6]
        for step, loss in metrics.items():
            assert history[step]["train/loss"] == pytest.approx(loss, rel=1e-6)
        evals = [json.loads(line) for line in RunFiles(run_dir).metrics_file(0).read_text().splitlines()]
        (last_eval,) = [r for r in evals if r["kind"] == "eval" and r["step"] == 6]
        assert history[6]["eval/loss"] == pytest.approx(last_eval["eval_loss"], rel=1e-6)
        rows = len(run.history)

        again = _cli(home, "sync", str(run_dir), env=env)
        assert again.returncode == 0 and "nothing to upload" in again.stdout, again.stdout + again.stderr
        assert len(run.history) == rows


def test_sync_without_credentials_fails_and_says_how_to_log_in(stopped_and_restarted, tmp_path):
    home, run_dir = stopped_and_restarted
    with WandbServer() as wb:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
        env.update(HOME=str(tmp_path), WANDB_BASE_URL=wb.url, HPCLAUNCH_HOME=str(home),
                   WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"))
        proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "sync", str(run_dir), "--include-synced"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert not wb.runs
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "W&B did not upload 2 of 2 offline run(s)" in proc.stderr
    assert "hint: run `wandb login` on this node (or set WANDB_API_KEY" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_online_mode_streams_from_the_job_and_sync_has_nothing_to_do(tmp_path):
    home = tmp_path / "home"
    with WandbServer() as wb:
        run_dir = submit(home, "gpt2", "--set", "train.max_steps=3", "--set", "tracking.wandb.project=live",
                         "--set", "tracking.wandb.mode=online", *QUICK,
                         env={"WANDB_BASE_URL": wb.url, "WANDB_API_KEY": KEY})
        run = wb.runs[f"live/{wandb_run_id(run_dir)}"]
        history = _history(run)
        assert sorted(s for s, h in history.items() if "train/loss" in h) == [1, 2, 3]
        for step, loss in losses(run_dir).items():
            assert history[step]["train/loss"] == pytest.approx(loss, rel=1e-6)
        proc = _cli(home, "sync", str(run_dir), env={"WANDB_BASE_URL": wb.url, "WANDB_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    assert "its W&B run was online (the job streamed it): nothing to upload" in proc.stdout
