"""`hpclaunch mcp` end to end, driven by the official SDK's client over stdio (tests/mcpclient.py) as an agent
drives it: dry-run, then really submit, tiny jobs on the `local` profile and on the dev cluster (`dev-slurm`),
follow them to COMPLETED with the status tool (timeline and goodput included), read their logs (tail, grep, one
rank), report and compare, diagnose a job whose script raised, cancel a running one. Every answer is checked
against the CLI's own `--json` output."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpclaunch.schedulers.base import TERMINAL
from tests.conftest import slurm_available
from tests.mcpclient import Client, mcp_client

REPO = Path(__file__).resolve().parents[2]

BOOM = '''"""Fails the way a training script does: rank 1 raises while the others wait."""
import os
import time

if os.environ["RANK"] == "1":
    raise ValueError("loss is nan at step 3 (the test's own failure)")
time.sleep(60)
'''


def follow(client: Client, job: str, timeout: float = 900) -> dict:
    """The status tool, called until the job ends (generous: the machine is shared)."""
    end = time.monotonic() + timeout
    while True:
        status = client.ok("status", job=job)
        if status["state"] in TERMINAL:
            return status
        assert time.monotonic() < end, status
        time.sleep(3)


def cli_json(hpclaunch, *args: str, lines: bool = False):
    res = hpclaunch(*args, "--json")
    assert res.exit_code == 0, res.output
    objects = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return objects if lines else objects[0]


def submit_confirmed(client: Client, **args) -> dict:
    """A dry run first (nothing recorded), then the same call with confirm: true."""
    dry = client.ok("submit", **args)
    assert dry["job_id"] is None and Path(dry["script"]).is_file()
    assert all(j["run_dir"] != dry["run_dir"] for j in client.ok("jobs"))  # a dry run is not recorded
    done = client.ok("submit", **args, confirm=True)
    assert done["job_id"] and done["run_dir"] != dry["run_dir"]
    return done


@pytest.mark.slow
def test_a_local_job_submitted_followed_and_read(hpclaunch):
    with mcp_client() as client:
        job = submit_confirmed(client, recipe=str(REPO / "recipes" / "gpt2"), profile="local", preset="tiny",
                               layout="1n2g", sets=["train.max_steps=4", "train.log_every=1"])["job_id"]
        status = follow(client, job)
        assert status["state"] == "COMPLETED", status
        assert status["timeline"] and status["goodput"] and status["last_metrics"]["step"] >= 4
        assert client.ok("jobs")[0]["job_id"] == job

        tail = client.ok("logs", job=job, tail=3)
        assert tail == cli_json(hpclaunch, "logs", job, "--tail", "3", lines=True)
        assert 0 < sum(1 for line in tail if line["rank"] == 0) <= 3
        one = client.ok("logs", job=job, rank=0)
        assert one and {line["rank"] for line in one} == {0}
        assert one == cli_json(hpclaunch, "logs", job, "--rank", "0", "--tail", "200", lines=True)
        assert client.ok("logs", job=job, rank=1) == []  # gpt2 prints on rank 0 only: rank 1's log is empty
        grep = client.ok("logs", job=job, grep="loss", tail=None)
        assert grep and all("loss" in line["line"] for line in grep)

        summary = client.ok("report", job=job)
        assert summary == cli_json(hpclaunch, "report", job)
        assert summary["steps"] >= 4 and summary["last_loss"] > 0 and summary["goodput"]
        same = client.ok("compare", job_a=job, job_b=job)
        assert same["max_abs_diff"] == 0 and same["common_steps"] >= 4


@pytest.mark.slow
def test_a_failed_job_is_diagnosed(hpclaunch, tmp_path):
    script = tmp_path / "boom" / "boom.py"
    script.parent.mkdir()
    script.write_text(BOOM)
    with mcp_client() as client:
        job = submit_confirmed(client, recipe=str(script), profile="local", layout="1n2g")["job_id"]
        status = follow(client, job)
        assert status["state"] == "FAILED", status
        found = client.ok("diagnose", job=job)
        assert found == cli_json(hpclaunch, "logs", job, "--diagnose")
        assert found["rank"] == 1 and "ValueError" in json.dumps(found) and "loss is nan" in json.dumps(found)
        errors = client.ok("logs", job=job, grep="ValueError", rank=1)
        assert errors and all(line["rank"] == 1 for line in errors)


@pytest.mark.slurm
@pytest.mark.skipif(not slurm_available(), reason="needs the dev Slurm cluster")
def test_a_dev_cluster_job_submitted_and_followed_to_completed(hpclaunch):
    with mcp_client() as client:
        done = submit_confirmed(client, recipe="allreduce", profile="dev-slurm", layout="2n1g")
        status = follow(client, done["job_id"])
        assert status["state"] == "COMPLETED" and status["profile"] == "dev-slurm", status
        assert status["timeline"] and "goodput" in status
        lines = client.ok("logs", job=done["job_id"], grep="world_size=2", tail=None)
        assert {line["rank"] for line in lines} == {0, 1}, lines

        slow = client.ok("submit", recipe="allreduce", profile="dev-slurm", layout="1n1g", preset="slow",
                         confirm=True)["job_id"]
        (cancelled,) = client.ok("cancel", jobs=[slow])["jobs"]
        assert cancelled["job_id"] == slow and cancelled["cancelled"] is True
        assert follow(client, slow, timeout=300)["state"] == "CANCELLED"
        assert client.error("cancel", jobs=[slow, "999999999"]).startswith("hpclaunch: error: ")
