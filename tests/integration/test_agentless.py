"""On the dev Slurm cluster: `launch.agent: none` (the node supervisor starts the ranks, no torchrun agent) trains
the tiny GPT-2 on 2 nodes to the same losses as torchrun's agent does, and `hpclaunch cancel` stops it as it
stops torchrun's ranks: each rank gets the signal, saves a checkpoint and stops, and nothing is left running; a rank
that fails ends the job, as under torchrun's --max-restarts=0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]
TINY = ("--preset", "tiny", "--nodes", "2", "--gpus-per-node", "1", "--set", "train.log_every=1",
        "--set", "train.save_every=0", "--set", "train.eval_steps=2", "--set", "health.enabled=false")
NONE = ("--set", "launch.agent=none")


def _cli(home: Path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home), **env})


def _submit(home: Path, *args: str, follow: bool = True) -> tuple[str, RunFiles]:
    proc = _cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", "dev-slurm", *TINY, *args,
                *(["--follow"] if follow else []), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE)
    run_dir = re.search(r"run directory: (\S+)", proc.stdout)
    assert job and run_dir, proc.stdout[-2000:]
    return job.group(1), RunFiles(Path(run_dir.group(1)))


def _train_records(run: RunFiles, rank: int = 0) -> list[dict]:
    path = run.metrics_file(rank)
    if not path.is_file():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == "train"]


def _stepped(run: RunFiles, *ranks: int) -> bool:
    """Whether each of `ranks` finished a step, by its node's record (what `status` reads)."""
    records = run.progress_records(0)
    return all(int(str(records.get(rank, {}).get("step", 0))) >= 1 for rank in ranks)


def _state(home: Path, job: str) -> str:
    return str(json.loads(_cli(home, "status", job, "--json").stdout)["state"])


@pytest.mark.slurm
@pytest.mark.slow
def test_tiny_gpt2_without_the_agent_matches_torchrun_on_two_nodes(tmp_path):
    home = tmp_path / "home"  # one store: the tiny model made by the first job is read by the second
    _, agent = _submit(home, "--set", "train.max_steps=4")
    job, direct = _submit(home, "--set", "train.max_steps=4", *NONE)
    assert _state(home, job) == "COMPLETED"
    want = {r["step"]: r["loss"] for r in _train_records(agent)}
    got = {r["step"]: r["loss"] for r in _train_records(direct)}
    assert sorted(got) == [1, 2, 3, 4]
    assert got == pytest.approx(want, rel=1e-5)
    output = direct.job_output(job).read_text()
    assert "torch.distributed.run" not in output and "torchelastic" not in output.lower(), output[-3000:]
    for rank in (0, 1):  # each node's rank, with its own log, as under torchrun
        assert direct.rank_log(rank, 0).is_file()
    for run in (agent, direct):  # with the agent or without, one writer per node: its record, all it writes
        _one_record_per_node(run)


def _one_record_per_node(run: RunFiles) -> None:
    """The job's progress reached the run directory as one record per node, each published by that node's
    supervisor at most once per publishing interval over its launch (plus its start and its end), holding its
    rank's last step; nothing per rank. Node 1 sent its records to node 0, which wrote both in its file; node 1
    wrote its own file at most once, at its start (before node 0 listened: the two start together)."""
    from hpclaunch.runtime.node.noderecord import PUBLISH_INTERVAL

    assert {p.name for p in run.progress.glob("*.json")} - {"node-1.restart-0.json"} == {"node-0.restart-0.json"}
    records: list[dict[str, Any]] = sorted(run.node_record_data(0), key=lambda r: str(r["node"]))
    assert [r["node"] for r in records] == ["0", "1"] and records[1]["files"] <= 1
    for node, record in enumerate(records):
        assert record["code"] == 0 and [int(r) for r in record["ranks"]] == [node]
        assert record["ranks"][str(node)]["phase"] == "done" and record["ranks"][str(node)]["step"] == 4
        assert record["writes"] <= 2 + (record["ended"] - record["started"]) / PUBLISH_INTERVAL + 1
    assert len({r["host"] for r in run.progress_records(0).values()}) == 2  # each rank's own node


@pytest.mark.slurm
@pytest.mark.slow
def test_cancel_without_the_agent_saves_and_stops_every_rank(tmp_path):
    home = tmp_path / "home"
    job, run = _submit(home, "--set", "train.max_steps=5000", "--set", "train.log_every=5", *NONE, follow=False)
    deadline = time.time() + 600
    while not _stepped(run, 0, 1) and time.time() < deadline:
        time.sleep(1)  # both ranks in the loop (their nodes' records say so): their stop handlers are set
    assert _stepped(run, 0, 1), "the ranks never reached the training loop"
    assert _cli(home, "cancel", job).returncode == 0
    deadline = time.time() + 300
    while _state(home, job) in ("RUNNING", "PENDING", "COMPLETING") and time.time() < deadline:
        time.sleep(2)
    assert _state(home, job) == "CANCELLED"
    deadline = time.time() + 120  # cancel returns at once; on a busy machine the ranks may still be saving
    while _left(run) and time.time() < deadline:
        time.sleep(1)
    assert not _left(run)
    for rank in (0, 1):  # every rank got the signal (rank 0 alone prints the loop's lines)
        log = run.rank_log(rank, 0).read_text()
        assert "got signal SIGTERM" in log and "Traceback" not in log, log[-3000:]
    assert "stopped at step" in run.rank_log(0, 0).read_text()
    (ckpt,) = run.checkpoints.iterdir()
    step = int(ckpt.name.split("-")[1])
    assert step % 5 == 0 and max(r["step"] for r in _train_records(run)) == step


def _left(run: RunFiles) -> str:
    """The processes still running from the run directory (none once the job ended cleanly)."""
    return subprocess.run(["pgrep", "-af", str(run.root)], capture_output=True, text=True).stdout.strip()


@pytest.mark.slurm
@pytest.mark.slow
def test_a_failing_rank_without_the_agent_ends_the_job(tmp_path):
    """Rank 1 (the allocation's second node) raises after step 3 (fault injection): its node's launch ends with the
    rank's code, the step ends the other node, and the job fails (a crash is a bug: no relaunch) with rank 1's
    traceback kept."""
    home = tmp_path / "home"
    proc = _cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", "dev-slurm", *TINY, *NONE,
                "--set", "train.max_steps=2000", "--follow", timeout=900, HPCLAUNCH_INJECT="crash:1:3")
    assert proc.returncode != 0, proc.stdout[-3000:]
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE)
    assert job, proc.stdout[-2000:]
    assert _state(home, job.group(1)) == "FAILED"
    # which rank failed is read from the job's own files, not from srun's wording (srun does not always print its
    # "task 1: Exited with exit code 1" line before the step ends the other node)
    diagnosis = json.loads(_cli(home, "logs", job.group(1), "--diagnose", "--json").stdout)
    assert diagnosis["rank"] == 1, diagnosis
    assert "InjectedCrashError" in (diagnosis["error"] or ""), diagnosis
    status = json.loads(_cli(home, "status", job.group(1), "--json").stdout)
    run = RunFiles(Path(status["run_dir"]))
    assert "InjectedCrashError" in run.rank_log(1, 0).read_text()
    assert json.loads(run.rank_exit(1, 0).read_text())["code"] == 1
    assert max(r["step"] for r in _train_records(run)) < 2000
