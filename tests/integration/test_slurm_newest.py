"""End to end on the second dev cluster (scripts/dev-cluster-sid.sh: the newest Slurm Debian packages, 26.05.5 on
2026-11-28, in a chroot beside the first), through both backends: Slurm's commands (dev-slurm-26, the cluster's
host-side wrappers first on PATH) and slurmrestd (dev-slurm-26-rest: 127.0.0.1:7820, OpenAPI v0.0.45 negotiated from
its `GET /openapi/v3`; hpclaunch runs with no Slurm command on its PATH). Small on purpose, one job of each kind per
backend: a 2-node all-reduce followed to RUNNING, warned (USR1 to its batch shell, as before preemption), requeued
by itself and completed on its second start; a 2-element sweep (one array) of the metrics-writing fixture recipe,
which `report` reads with the cluster's accounting; a held job's pending reason in words, then cancelled; `profiles
check`. The cluster is started by .ci/run and scripts/test.sh; a machine without it skips, which strict skips fail."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from tests.integration.backends import path_without_slurm
from tests.integration.waiting import Deadline

REPO = Path(__file__).resolve().parents[2]
SID = REPO / "scripts" / "dev-cluster-sid.sh"
BIN = Path(os.environ.get("HPCLAUNCH_DEV_SID", "/var/lib/hpclaunch-dev-cluster-sid")) / "bin"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _up() -> bool:
    return os.geteuid() == 0 and SID.is_file() and subprocess.run(
        [str(SID), "status"], capture_output=True, timeout=60).returncode == 0


pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not _up(), reason="the second dev cluster is not up (scripts/dev-cluster-sid.sh up)")]


def slurm(*args: str) -> subprocess.CompletedProcess[str]:
    """One of the cluster's own commands (its wrapper: chroot into its root), as an operator runs it."""
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module", params=["dev-slurm-26", "dev-slurm-26-rest"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The profile, its `submit` options and the environment hpclaunch runs with: its own HPCLAUNCH_HOME; this
    checkout on the nodes (PYTHONPATH; REST passes it with --export); the wrappers first on PATH, or for REST a PATH
    without Slurm's commands and the token in SLURM_JWT."""
    profile = request.param
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JWT", "SLURM_JWT_FILE", "SLURMRESTD_URL")}
    env.update(HPCLAUNCH_HOME=str(tmp_path_factory.mktemp(profile)), PYTHONPATH=str(REPO),
               HPCLAUNCH_PATH=str(REPO / "tests" / "fixtures"))
    args: tuple[str, ...] = ("--profile", profile)
    if profile.endswith("-rest"):
        token = subprocess.run([str(SID), "token", "7200"], capture_output=True, text=True, check=True)
        env.update(PATH=path_without_slurm(), SLURM_JWT=token.stdout.strip().removeprefix("SLURM_JWT="))
        args += ("--sbatch", "export=PYTHONPATH")
    else:
        env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    yield {"profile": profile, "args": args, "env": env, "rest": profile.endswith("-rest")}


def hpclaunch(backend: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], env=backend["env"],
                          capture_output=True, text=True, timeout=900)
    assert not check or proc.returncode == 0, f"hpclaunch {' '.join(args)}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    assert "SLURM_JWT" not in backend["env"] or backend["env"]["SLURM_JWT"] not in proc.stdout + proc.stderr
    return proc


def status(backend: dict, job: str) -> dict:
    """`hpclaunch status JOB --json` in this process (a poll without a Python start-up; the version negotiated with
    slurmrestd is kept between polls, as within one command)."""
    from click.testing import CliRunner

    from hpclaunch.cli.main import cli

    with mock.patch.dict(os.environ, backend["env"], clear=True):
        result = CliRunner().invoke(cli, ["status", job, "--json"], catch_exceptions=False, prog_name="hpclaunch")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    return answer[0] if isinstance(answer, list) else answer


def wait(backend: dict, job: str, states: set[str], seconds: float = 180) -> dict:
    deadline = Deadline(seconds, [job])
    while (found := status(backend, job))["state"] not in states:
        deadline.check(f"job {job} did not reach {states} (last: {found['state']})")
        time.sleep(1)
    return found


def wait_for(what: str, ready, seconds: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = Deadline(seconds)
    while not ready():
        deadline.check(what)
        time.sleep(0.5)


def test_a_job_runs_is_warned_requeues_itself_and_completes(backend):
    sub = json.loads(hpclaunch(backend, "submit", "allreduce", *backend["args"], "--layout", "2n1g", "--set",
                               'args=["--sleep", "600", "--sleep-unless-exists", "go"]', "--set",
                               "health.enabled=false", "--json").stdout)
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    out = run_dir / "logs" / f"job.{job}.out"
    assert int(job) >= 5000000  # the second cluster's ids (FirstJobId), never the first one's
    wait(backend, job, {"RUNNING"})
    wait_for("the ranks did not all-reduce", lambda: len([p for p in (run_dir / "logs").glob("rank-*.restart-0.log")
                                                          if "reduced=3" in p.read_text()]) == 2)
    assert slurm("scancel", "--signal=USR1", "--batch", job).returncode == 0
    wait_for("the job did not requeue itself", lambda: "requeueing job" in out.read_text())
    (run_dir / "go").touch()  # the second start sleeps no more
    deadline = Deadline(60, [job])  # Slurm holds a requeued job back (BeginTime): start it now, as an operator would
    while slurm("scontrol", "update", f"JobId={job}", "StartTime=now").returncode:
        deadline.check(f"job {job} was not pending again after its requeue")
        time.sleep(0.5)
    found = wait(backend, job, ENDED)
    text = out.read_text()
    assert found["state"] == "COMPLETED", text[-3000:]
    assert f"hpclaunch: job {job} restart 1 on sid" in text
    assert len([p for p in (run_dir / "logs").glob("rank-*.restart-1.log") if "reduced=3" in p.read_text()]) == 2


@pytest.fixture(scope="module")
def sweep(backend) -> dict:
    proc = hpclaunch(backend, "submit", "failmodes", *backend["args"], "--preset", "metrics", "--layout", "1n1g",
                     "--sweep", "train.seed=1,2", "--max-parallel", "2", "--follow")
    sweep_id = proc.stdout.split()[2].rstrip(":")  # "submitted sweep 123: 2 elements ..."
    (entry,) = [j for j in json.loads(hpclaunch(backend, "jobs", "--json").stdout) if j["job_id"] == sweep_id]
    return entry


def test_a_sweep_is_one_array(backend, sweep):
    assert sweep["state"] == "COMPLETED"
    assert [(e["job_id"], e["state"]) for e in sweep["elements"]] == [(f"{sweep['job_id']}_0", "COMPLETED"),
                                                                     (f"{sweep['job_id']}_1", "COMPLETED")]


def test_report_has_the_metrics_and_the_accounting(backend, sweep):
    element = sweep["elements"][0]["job_id"]
    deadline = Deadline(60)
    while not (report := json.loads(hpclaunch(backend, "report", element, "--json").stdout))["usage"].get("cpu_s"):
        deadline.check("the accounting had no CPU time of the job")  # slurmdbd has the steps a moment after the end
        time.sleep(1)
    used = report["usage"]
    assert used["source"] == ("slurmdbd" if backend["rest"] else "sacct") and used["state"] == "COMPLETED"
    assert used["elapsed_s"] > 0 and used["time_limit_s"] == 600 and used["nodes"] == 1
    assert "loss" in json.dumps(report)


def test_a_held_job_waits_in_words_and_cancels(backend):
    job = json.loads(hpclaunch(backend, "submit", "allreduce", *backend["args"], "--layout", "1n1g", "--sbatch",
                               "hold", "--json").stdout)["job_id"]
    found = status(backend, job)
    assert (found["state"], found["reason"]) == ("PENDING", "JobHeldUser")
    assert found["reason_text"] == f"held by its owner (`scontrol release {job}`)"
    assert hpclaunch(backend, "cancel", job).stdout.startswith(f"cancelled job {job}")
    assert wait(backend, job, ENDED, 60)["state"] == "CANCELLED"


def test_profiles_check(backend):
    proc = hpclaunch(backend, "profiles", "check", backend["profile"])
    text = proc.stdout + proc.stderr
    assert f"{backend['profile']}: all" in text and "checks passed" in text
    if backend["rest"]:
        # the release and the newest version both speak (26.05.5: v0.0.45, of v0.0.42-v0.0.45)
        assert re.search(r"answers at http://127\.0\.0\.1:7820 \(Slurm \d+\.\d+\.\d+, OpenAPI v0\.0\.4\d; it "
                         r"serves v0\.0\.4\d-v0\.0\.4\d\)", text), text
    else:
        assert "slurm commands\tok" in text
