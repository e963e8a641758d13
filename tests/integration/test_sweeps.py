"""A sweep on the dev Slurm cluster: `submit recipes/gpt2 --preset tiny --sweep train.lr=... --max-parallel K`
runs as one job array; each element trains with its own lr into its own run directory; with K=1 the elements
never overlap in time (sacct Start/End); `jobs --json` shows the sweep with both elements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from hpclaunch.runtime.train.schedule import lr_at
from tests.integration.waiting import LONG_S

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LRS = ("2e-3", "5e-3")
SHORT = ("--set", "train.max_steps=4", "--set", "train.log_every=1", "--set", "train.save_every=0",
         "--set", "train.eval_steps=1", "--set", "train.warmup_steps=0")


def cli(home: Path, *args: str, timeout: float = LONG_S) -> subprocess.CompletedProcess:  # --follow: queued time in it
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home)})


def run_sweep(home: Path, max_parallel: int) -> dict:
    proc = cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", "dev-slurm", "--preset", "tiny",
               "--layout", "1n1g", *SHORT, "--sweep", f"train.lr={','.join(LRS)}",
               "--max-parallel", str(max_parallel), "--follow")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep_id = proc.stdout.split()[2].rstrip(":")  # "submitted sweep 123: 2 elements ..."
    jobs = json.loads(cli(home, "jobs", "--json").stdout)
    (entry,) = [j for j in jobs if j["job_id"] == sweep_id]
    return entry


def sacct_times(job_id: str) -> tuple[datetime, datetime]:
    out = subprocess.run(["sacct", "-n", "-X", "--parsable2", "--format=Start,End", f"--jobs={job_id}"],
                         capture_output=True, text=True, check=True).stdout.split("\n")[0]
    start, end = out.split("|")
    return datetime.fromisoformat(start), datetime.fromisoformat(end)


def train_records(run_dir: str) -> list[dict]:
    lines = (Path(run_dir) / "metrics" / "rank-0.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("kind") == "train"]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hpclaunch-home")


def check_elements(entry: dict) -> list[dict]:
    sweep_id = entry["job_id"]
    elements = entry["elements"]
    assert [e["job_id"] for e in elements] == [f"{sweep_id}_0", f"{sweep_id}_1"]
    assert entry["state"] == "COMPLETED"
    for element, lr in zip(elements, LRS, strict=True):
        assert element["state"] == "COMPLETED"
        assert element["sweep"]["values"] == {"train.lr": lr}
        records = train_records(element["run_dir"])
        assert records, element["run_dir"]
        # the element's own lr, through the recipe's schedule (no warmup, cosine decay to min_lr 1e-4)
        step = records[0]["step"]
        expected = [lr_at(s, lr=float(lr), min_lr=1e-4, warmup=0, max_steps=4) for s in (step - 1, step)]
        assert any(records[0]["lr"] == pytest.approx(x, rel=1e-3) for x in expected), (records[0], expected)
        out = (Path(element["run_dir"]) / "logs" / f"job.{element['job_id']}.out").read_text()
        assert f"hpclaunch: job {element['job_id']} restart 0" in out  # HPCLAUNCH_JOB_ID is ARRAY_TASK
    return elements


def test_sweep_one_at_a_time_never_overlaps(home):
    elements = check_elements(run_sweep(home, 1))
    (s0, e0), (s1, e1) = (sacct_times(e["job_id"]) for e in elements)
    assert e0 <= s1 or e1 <= s0, f"elements overlapped: {s0}-{e0} and {s1}-{e1}"


def test_sweep_two_at_a_time(home):
    entry = run_sweep(home, 2)
    check_elements(entry)
    report = cli(home, "report", entry["job_id"], "--json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert [e["values"] for e in data["elements"]] == [f"train.lr={lr}" for lr in LRS]
