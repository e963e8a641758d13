"""End to end on the real dev Slurm cluster (scripts/dev-cluster.sh up): `hpclaunch submit` of the
all-reduce test recipe really runs on 2 nodes x 2 ranks under torchrun and under the deepspeed launcher,
the module the profile loads is visible in the job, `status` follows it to COMPLETED, and `cancel`
stops a running job; each through Slurm's commands (dev-slurm) and through slurmrestd (dev-slurm-rest), but for
torchrun's all-reduce (through dev-slurm only: see its test).
The same recipe also runs under the `local` profile (no Slurm)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest

from tests.integration.waiting import Deadline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
needs_slurm = pytest.mark.skipif(shutil.which("sinfo") is None
                                 or subprocess.run(["sinfo"], capture_output=True).returncode != 0,
                                 reason="the dev Slurm cluster is not up (scripts/dev-cluster.sh up)")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HPCLAUNCH_HOME": str(tmp_path / "home"), "HPCLAUNCH_PATH": str(FIXTURES)}


def hpclaunch(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"hpclaunch {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def status_json(env: dict[str, str], job: str) -> dict:
    """`hpclaunch status JOB --json` run in this process with `env` (a poll without a Python start-up each time:
    ~0.1 CPU s saved a poll on the 2 shared cores); the first record when it answers a list."""
    from click.testing import CliRunner

    from hpclaunch.cli.main import cli

    with mock.patch.dict(os.environ, env, clear=True):  # what a subprocess given env= would see
        result = CliRunner().invoke(cli, ["status", job, "--json"], catch_exceptions=False, prog_name="hpclaunch")
    assert result.exit_code == 0, f"hpclaunch status {job} --json exited {result.exit_code}:\n{result.output}"
    answer = json.loads(result.stdout)
    return answer[0] if isinstance(answer, list) else answer


def submit(env: dict[str, str], *args: str) -> dict[str, str]:
    return json.loads(hpclaunch(env, "submit", *args, "--json").stdout)


def hostnames(nodelist: str) -> list[str]:
    """A Slurm node list (node[2-3]) as its host names, in order (scontrol show hostnames)."""
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                          check=True).stdout.split()


def job_hosts(job: str) -> list[str]:
    """The hosts of a job's allocation in rank order (rank r of a one-rank-per-node job runs on the r-th), from
    sacct: which nodes the scheduler chose depends on what else ran (a node still cleaning up after the last test)."""
    nodes = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "--format=NodeList"], capture_output=True,
                           text=True, check=True).stdout.strip()
    return hostnames(nodes)


def wait_state(env: dict[str, str], job: str, states: set[str], timeout: float = 300) -> list[str]:
    """Poll `hpclaunch status JOB --json` (status_json) until the job reaches one of `states`; return the states seen.

    `timeout` is what the job itself may take: the time it waits PENDING for nodes (other tests' jobs hold them while
    the suite runs on several workers) is added to it (tests/integration/waiting.py), so a busy cluster delays the
    test instead of failing it."""
    seen: list[str] = []
    deadline = Deadline(timeout, [job])
    while True:
        state = status_json(env, job)["state"]
        if not seen or seen[-1] != state:
            seen.append(state)
        if state in states:
            return seen
        deadline.check(f"job {job} did not reach {states}; states seen: {seen}")
        time.sleep(1)


RANK_LINE = re.compile(r"rank=(\d+) world_size=(\d+) local_rank=(\d+) host=(\S+) reduced=(\S+) expected=(\S+) "
                       r"module=(\S+) launcher=(\S+)")


def rank_lines(run_dir: Path) -> dict[int, tuple[str, ...]]:
    """What each rank printed, read from its own log file (logs/rank-R.restart-0.log)."""
    found = {}
    for log in sorted((run_dir / "logs").glob("rank-*.restart-0.log")):
        m = RANK_LINE.search(log.read_text())
        assert m, f"{log} has no all-reduce line:\n{log.read_text()}"
        found[int(m.group(1))] = m.groups()
        assert log.name == f"rank-{m.group(1)}.restart-0.log"
    return found


@needs_slurm
@pytest.mark.slurm
# torchrun through dev-slurm only: a 2 x 2 job through slurmrestd is the deepspeed one here, and torchrun through
# slurmrestd on two nodes is tests/integration/test_slurm_rest.py's GPT-2 (the profile's module seen there too)
@pytest.mark.parametrize(("recipe", "launcher", "backend"), [("allreduce", "torchrun", "dev-slurm"),
                                                           ("allreduce_ds", "deepspeed", "dev-slurm"),
                                                           ("allreduce_ds", "deepspeed", "dev-slurm-rest")],
                         indirect=["backend"])
def test_two_nodes_two_ranks_all_reduce(env, recipe, launcher, backend):
    """Over 30 s with DeepSpeed: its import (~5 CPU s) in each of 4 ranks, on 2 shared cores."""
    env = backend.env(env)
    sub = submit(env, recipe, *backend.args, "--nodes", "2", "--gpus-per-node", "2")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    seen = wait_state(env, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"})
    assert seen[-1] == "COMPLETED", (seen, (run_dir / "logs" / f"job.{job}.out").read_text())
    ranks = rank_lines(run_dir)
    assert sorted(ranks) == [0, 1, 2, 3]
    for rank, (_, world, local_rank, _host, reduced, expected, module, used) in ranks.items():
        assert world == "4"
        assert float(reduced) == 10.0 == float(expected)  # 1 + 2 + 3 + 4
        assert module == "1.0", "the profile's `module load hpclaunch-dev/1.0` is not visible in the job"
        assert used == launcher
        assert int(local_rank) == rank % 2
    # two of the dev cluster's nodes (which two depends on what else runs there), two ranks on each
    hosts = [ranks[r][3] for r in sorted(ranks)]
    assert hosts[0] == hosts[1] != hosts[2] == hosts[3], hosts
    assert set(hosts) <= {"node1", "node2", "node3", "node4"}, hosts
    assert (run_dir / "ds_config.json").is_file() == (launcher == "deepspeed")
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert "world_size=4" in out  # the batch output carries every rank's lines too, prefixed


def test_local_profile_runs_the_same_recipe(env):
    sub = submit(env, "allreduce", "--profile", "local", "--gpus-per-node", "2")
    seen = wait_state(env, sub["job_id"], {"COMPLETED", "FAILED", "CANCELLED"}, timeout=180)
    assert seen[-1] == "COMPLETED"
    ranks = rank_lines(Path(sub["run_dir"]))
    assert sorted(ranks) == [0, 1]
    assert all(v[1] == "2" and float(v[4]) == 3.0 for v in ranks.values())


def _processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if text in line and " Z" not in line and "ps -eo" not in line]


@needs_slurm
@pytest.mark.slurm
def test_cancel_running_slurm_job(env, backend):
    env = backend.env(env)
    sub = submit(env, "allreduce", *backend.args, "--nodes", "2", "--gpus-per-node", "2",
                 "--preset", "slow")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    wait_state(env, job, {"RUNNING"}, timeout=120)
    # wait until the ranks are really up (their all-reduce line is logged), then cancel
    deadline = time.time() + 120
    while time.time() < deadline and len(list((run_dir / "logs").glob("rank-*.log"))) < 4:
        time.sleep(1)
    assert hpclaunch(env, "cancel", job).stdout.startswith(f"cancelled job {job} (it was RUNNING)")
    seen = wait_state(env, job, {"CANCELLED", "COMPLETED", "FAILED"}, timeout=120)
    assert seen[-1] == "CANCELLED"
    deadline = time.time() + 30
    while time.time() < deadline and _processes_mentioning(str(run_dir)):
        time.sleep(1)
    assert _processes_mentioning(str(run_dir)) == []


def test_cancel_running_local_job(env):
    sub = submit(env, "allreduce", "--profile", "local", "--preset", "slow")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    wait_state(env, job, {"RUNNING"}, timeout=60)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((run_dir / "logs").glob("rank-*.log"))) < 2:
        time.sleep(0.5)
    hpclaunch(env, "cancel", job)
    assert wait_state(env, job, {"CANCELLED", "COMPLETED", "FAILED"}, timeout=30)[-1] == "CANCELLED"
    deadline = time.time() + 20
    while time.time() < deadline and _processes_mentioning(str(run_dir)):
        time.sleep(0.5)
    assert _processes_mentioning(str(run_dir)) == []


@needs_slurm
@pytest.mark.slurm
def test_a_rest_token_in_the_submitting_shell_does_not_break_srun(env):
    """A user of both backends has SLURM_JWT exported; sbatch passes it into the job, where srun would
    authenticate with it and slurmd refuse the step. The job script drops it: the job completes."""
    from tests.integration.backends import rest_token

    token = rest_token()
    assert token, "slurmrestd with JWT is not up (scripts/dev-cluster.sh up)"
    env = {**env, "SLURM_JWT": token}
    sub = submit(env, "allreduce", "--profile", "dev-slurm", "--layout", "1n1g")
    seen = wait_state(env, sub["job_id"], {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"})
    assert seen[-1] == "COMPLETED", (Path(sub["run_dir"]) / "logs" / f"job.{sub['job_id']}.out").read_text()[-2000:]
