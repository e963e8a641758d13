"""An agent's loop through `hpclaunch mcp` with the official SDK's client (tests/mcpclient.py), on the `local`
profile: plan -> submit -> the job fails -> diagnose -> the fix -> submit again -> COMPLETED in at most 8 tool
calls, waiting with the wait tool (progress notifications, no polling loop); and the agents' queue budget of a
profile (agents.max_running) refusing a submit beyond it, with `hpclaunch wait`'s exit codes on the same job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.mcpclient import Client, mcp_client

REPO = Path(__file__).resolve().parents[2]
TINY = {"recipe": "gpt2", "profile": "local", "preset": "tiny"}
STEPS = "train.max_steps=4"


def data(res) -> dict:
    texts = [c.text for c in res.content]
    assert not res.is_error, texts
    return json.loads(texts[0])


@pytest.mark.slow
def test_an_agent_goes_from_plan_to_completed_in_at_most_8_calls(hpc_home):
    calls: list[str] = []

    def call(client: Client, name: str, **args):
        calls.append(name)
        return client.call(name, **args)

    with mcp_client() as client:
        planned = data(call(client, "plan", **TINY))  # the local profile's CPU "devices" have no memory limit
        assert planned["params"] > 0 and planned["fits"] is None and planned["device_gib"] is None, planned
        # the agent's first try passes the learning rate as a flag, which the recipe's script does not take
        first = data(call(client, "submit", **TINY, sets=[STEPS, 'args=["--lr", "3e-4"]'], confirm=True))
        calls.append("wait")
        res, progress = client.call_with_progress("wait", job=first["job_id"], until="end", timeout=900)
        ended = data(res)
        assert ended["state"] == "FAILED" and ended["outcome"] == "ended", ended
        assert progress and any("FAILED" in message for _, message in progress), progress
        why = data(call(client, "diagnose", job=first["job_id"]))
        assert "unrecognized arguments: --lr 3e-4" in json.dumps(why), why
        # the fix the diagnosis points to: the recipe's own key (train.lr), not a flag
        second = data(call(client, "submit", **TINY, sets=[STEPS, "train.lr=3e-4"], confirm=True))
        done = data(call(client, "wait", job=second["job_id"], until="end", timeout=900))
        assert done["state"] == "COMPLETED" and done["outcome"] == "reached", done
        assert done["seen"][-1]["state"] == "COMPLETED"
    assert len(calls) <= 8, calls
    assert calls == ["plan", "submit", "wait", "diagnose", "submit", "wait"]


def budget_profile(folder: Path) -> Path:
    """The `local` profile with a queue budget for agents of one running job."""
    profile = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    profile["agents"] = {"max_running": 1}
    path = folder / "local-budget.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def wait_cli(job: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "wait", job, *args], capture_output=True,
                          text=True, timeout=900)


def test_an_agents_submit_beyond_the_queue_budget_is_refused(hpc_home, tmp_path):
    profile = str(budget_profile(tmp_path))
    hold = {"recipe": "allreduce", "profile": profile, "sets": ['args=["--sleep", "600", "--sleep-unless-exists", '
                                                                '"go"]']}
    with mcp_client() as client:
        job = client.ok("submit", **hold, confirm=True)
        running = wait_cli(job["job_id"], "--until", "RUNNING", "--json")
        assert running.returncode == 0 and json.loads(running.stdout)["state"] == "RUNNING", running
        still = wait_cli(job["job_id"], "--timeout", "0")
        assert still.returncode == 124 and "is still RUNNING" in still.stdout, still
        refused = client.error("submit", **hold, confirm=True)
        assert "agents.max_running is 1" in refused and job["job_id"] in refused, refused
        assert client.ok("submit", **hold)["job_id"] is None  # a dry run is never held to the budget
        assert [j["job_id"] for j in client.ok("jobs")] == [job["job_id"]]  # the refused one left nothing
        (Path(job["run_dir"]) / "go").touch()
        ended = wait_cli(job["job_id"])
        assert ended.returncode == 0 and f"job {job['job_id']}: COMPLETED" in ended.stdout, ended
