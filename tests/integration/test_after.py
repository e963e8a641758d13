"""`submit --after` on the real dev Slurm cluster: job B, submitted after job A, stays PENDING with reason
Dependency while A runs, then runs and completes once A completed. Through both backends (Slurm's commands;
slurmrestd)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.backends import Backend
from tests.integration.test_slurm_launch import env, hpclaunch, needs_slurm, submit, wait_state  # noqa: F401

pytestmark = [pytest.mark.slurm, needs_slurm]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _status(environ: dict[str, str], job: str) -> dict:
    answer = json.loads(hpclaunch(environ, "status", job, "--json").stdout)
    return answer[0] if isinstance(answer, list) else answer


def test_a_job_submitted_after_another_waits_for_it_then_completes(env: dict[str, str], backend: Backend) -> None:  # noqa: F811
    """Over 30 s: two jobs one after the other (B starts only once A ended), each a torch start-up on a node."""
    env = backend.env(env)
    # A runs until the test lets it end (the file `go` in its run directory), not for a guessed number of seconds
    a = submit(env, "allreduce", *backend.args, "--layout", "1n1g", "--set",
               'args=["--sleep", "900", "--sleep-unless-exists", "go"]')
    b = submit(env, "allreduce", *backend.args, "--layout", "1n1g", "--after", f"{a['job_id']}:ok")
    try:
        wait_state(env, a["job_id"], {"RUNNING"}, timeout=120)
        waiting = _status(env, b["job_id"])
        assert waiting["state"] == "PENDING" and waiting["reason"] == "Dependency", waiting
        assert _status(env, a["job_id"])["state"] == "RUNNING"  # A still runs: B waited for it, not for a node
        (Path(a["run_dir"]) / "go").touch()
        seen = wait_state(env, b["job_id"], ENDED, timeout=300)
        assert seen[-1] == "COMPLETED", seen
        assert _status(env, a["job_id"])["state"] == "COMPLETED"
    finally:
        for job in (a["job_id"], b["job_id"]):
            hpclaunch(env, "cancel", job, check=False)
