"""On the dev Slurm cluster: the scale benchmark's torch-free job (tests/fixtures/recipes/stub, benchmarks/scale.py)
goes through the real launch on 2 nodes (health, the node supervisor, rank_exec), its ranks meet over TCP, and it
leaves what a real training run leaves: every start-up stamp to the first step, each rank's progress record at its
last step, metrics lines per rank, a checkpoint with every rank's part and its record, and a
`status` that reads them. One job of a few seconds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles
from tests.integration.waiting import LONG_S

REPO = Path(__file__).resolve().parents[2]


def _cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home)})


@pytest.mark.slurm
def test_the_stub_job_leaves_what_a_training_run_leaves(tmp_path):
    proc = _cli(tmp_path, "submit", str(REPO / "tests" / "fixtures" / "recipes" / "stub"), "--profile", "dev-slurm",
                "--preset", "short", "--nodes", "2", "--gpus-per-node", "1", "--follow", timeout=LONG_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE).group(1)
    run = RunFiles(Path(re.search(r"run directory: (\S+)", proc.stdout).group(1)))
    assert "[stub] step 6/6" in proc.stdout and "over 2 rank(s)" in proc.stdout

    stamps = {rec["phase"] for rec in timeline.read(run)}
    assert {"health_checked", "ranks_started", "imports_done", "rendezvous_done", "first_step", "finished"} <= stamps
    records = run.progress_records(0)
    assert sorted(records) == [0, 1] and {(r["step"], r["phase"]) for r in records.values()} == {(6, "done")}
    # node 1 sent its records to node 0's supervisor over TCP (hpclaunch/runtime/node/recordlink.py): node 0's file
    # holds them; every node's newest record says it ended 0
    held = json.loads(run.node_record(0, 0).read_text()).get("nodes", {})
    assert held.get("1", {}).get("ranks"), f"node 0 holds no record of node 1: {sorted(held)}"
    assert {r["node"]: r["code"] for r in run.node_record_data(0)} == {"0": 0, "1": 0}
    for rank in (0, 1):
        train = [r for r in map(json.loads, run.metrics_file(rank).read_text().splitlines()) if r["kind"] == "train"]
        assert [r["step"] for r in train] == [5, 6] and all(r["world_size"] == 2 for r in train)
    newest = run.latest_checkpoint()
    assert newest is not None and newest[0] == 3
    assert sorted(p.name for p in newest[1].iterdir()) == ["rank-0.json", "rank-1.json"]
    saved = [json.loads(line) for line in run.checkpoint_log.read_text().splitlines()]
    assert [(r["step"], r["job"]) for r in saved] == [(3, job)]

    status = _cli(tmp_path, "status", job, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "COMPLETED"
