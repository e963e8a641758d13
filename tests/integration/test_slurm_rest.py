"""The slurm-rest scheduler on the dev cluster's slurmrestd (127.0.0.1:6820, JWT), with hpclaunch run where Slurm's
commands are not: its PATH has no sbatch, squeue, scontrol, scancel, sacct (the compute nodes keep theirs).

GPT-2 tiny on 2 nodes follows to COMPLETED with the losses of the same run on dev-slurm (sbatch); a held job and
one queued after it show their pending reasons in words, and cancel; a 2-element sweep runs as one array;
`report` has the usage from slurmdbd; a wrong token is an error in words (exit 2, no traceback). The token is
never in a run directory, the registry, hpclaunch's output, nor slurmrestd's log.

The jobs get `--sbatch export=PYTHONPATH`: the compute nodes' default hpclaunch (the dev cluster's venv) may be
another checkout's; with it both sides run this one, as the dev-slurm jobs do (sbatch passes PYTHONPATH on)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.backends import path_without_slurm, rest_token

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
REST_LOG = Path("/var/log/slurm-dev/slurmrestd.log")
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
SHORT = ("--set", "train.max_steps=8", "--set", "train.log_every=1", "--set", "train.save_every=0",
         "--set", "train.eval_steps=1")


TOKEN = rest_token()
pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not TOKEN,
                                 reason="slurmrestd with JWT is not up on 127.0.0.1:6820 (scripts/dev-cluster.sh up)")]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hpclaunch-rest-home")


@pytest.fixture(scope="module")
def no_slurm_path() -> str:
    return path_without_slurm()


def run(home: Path, *args: str, path: str | None = None, token: str = TOKEN,
        timeout: float = 600) -> subprocess.CompletedProcess:
    """hpclaunch in a subprocess with the token in SLURM_JWT and a PATH without Slurm's commands; with `path`
    None (a dev-slurm run) Slurm's PATH and no token: sbatch passes the environment on, and srun in a job
    with SLURM_JWT set authenticates with it (slurmd refuses it)."""
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "HPCLAUNCH_PATH": str(FIXTURES), "PYTHONPATH": str(REPO)}
    for name in ("SLURM_JWT", "SLURM_JWT_FILE", "SLURMRESTD_URL"):
        env.pop(name, None)
    if path is not None:
        env.update(PATH=path, SLURM_JWT=token)
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert TOKEN not in proc.stdout + proc.stderr
    return proc


def submitted(proc: subprocess.CompletedProcess) -> tuple[str, Path]:
    ok(proc)
    job = re.search(r"^submitted (?:job|sweep) (\S+?):? ", proc.stdout, re.M)
    run_dir = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    assert job and run_dir, proc.stdout + proc.stderr
    return job.group(1), Path(run_dir.group(1))


def losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines) if r["kind"] == "train"}


def status(home: Path, path: str, job: str) -> dict:
    answer = json.loads(ok(run(home, "status", job, "--json", path=path)).stdout)
    return answer[0] if isinstance(answer, list) else answer


def no_token_in(*places: Path) -> None:
    for place in places:
        files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
        for f in files:
            assert TOKEN.encode() not in f.read_bytes(), f"the token is written in {f}"


@pytest.fixture(scope="module")
def gpt2_rest(home, no_slurm_path) -> tuple[str, Path]:
    """GPT-2 tiny, 2 nodes x 1 rank, through slurmrestd, followed to its end."""
    proc = run(home, "submit", "gpt2", "--profile", "dev-slurm-rest", "--preset", "tiny", "--layout", "2n1g", *SHORT,
               "--sbatch", "export=PYTHONPATH", "--follow", path=no_slurm_path)
    return submitted(proc)


@pytest.mark.slow
def test_gpt2_on_two_nodes_completes_with_the_losses_of_dev_slurm(home, no_slurm_path, gpt2_rest):
    job, run_dir = gpt2_rest
    assert status(home, no_slurm_path, job)["state"] == "COMPLETED"
    out = (run_dir / "logs" / f"job.{job}.out").read_text()
    assert re.search(rf"hpclaunch: job {job} restart 0 on node\d,node\d, head node\d:", out), out[-2000:]
    # (its own home: `jobs` in the REST tests' home asks only slurmrestd)
    reference = submitted(run(home.with_name(f"{home.name}-sbatch"), "submit", "gpt2", "--profile", "dev-slurm",
                              "--preset", "tiny", "--layout", "2n1g", *SHORT, "--follow"))[1]
    rest, slurm = losses(run_dir), losses(reference)
    assert sorted(rest) == sorted(slurm) == list(range(1, 9))
    for step in slurm:
        assert abs(rest[step] - slurm[step]) < 1e-6, (step, rest[step], slurm[step])
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert "hpclaunch-dev/1.0" in json.dumps(provenance)  # the profile's modules, loaded in a login environment
    no_token_in(run_dir, home / "registry", REST_LOG)


@pytest.mark.slow
def test_report_has_the_usage_from_slurmdbd(home, no_slurm_path, gpt2_rest):
    job, _ = gpt2_rest
    for _ in range(30):  # slurmdbd records the steps (their TotalCPU) a moment after the job ends
        used = json.loads(ok(run(home, "report", job, "--json", path=no_slurm_path)).stdout)["usage"]
        # the peak memory is there at once (the ranks' high-water marks, over sacct's sampled MaxRSS): wait for
        # the accounting's own figures
        if used.get("cpu_s"):
            break
        time.sleep(1)
    sacct = subprocess.run(["sacct", "-n", "-X", "--parsable2", "--format=ElapsedRaw,TimelimitRaw,AllocCPUS",
                            f"--jobs={job}"], capture_output=True, text=True, check=True).stdout
    elapsed, limit, cpus = map(int, sacct.split()[0].split("|"))
    assert used["source"] == "slurmdbd" and used["state"] == "COMPLETED"
    assert used["elapsed_s"] == elapsed and used["time_limit_s"] == limit * 60 == 1200 and used["cpus"] == cpus
    assert used["nodes"] == 2 and used["cpu_s"] > 0 and used["max_rss_bytes"] > 50 * 2**20
    text = ok(run(home, "report", job, path=no_slurm_path)).stdout
    assert re.search(r"^usage \(slurmdbd\): elapsed \d+:\d\d of 20:00", text, re.M), text


def test_pending_reasons_in_words_then_cancel(home, no_slurm_path):
    held, run_dir = submitted(run(home, "submit", "allreduce", "--profile", "dev-slurm-rest", "--layout", "1n1g",
                                  "--sbatch", "hold", path=no_slurm_path))
    after, _ = submitted(run(home, "submit", "allreduce", "--profile", "dev-slurm-rest", "--layout", "1n1g",
                             "--after", f"{held}:any", path=no_slurm_path))
    first, second = status(home, no_slurm_path, held), status(home, no_slurm_path, after)
    assert (first["state"], first["reason"]) == ("PENDING", "JobHeldUser")
    assert first["reason_text"] == f"held by its owner (`scontrol release {held}`)"
    assert (second["state"], second["reason"]) == ("PENDING", "Dependency")
    assert second["reason_text"].startswith("waiting for the job(s) it depends on to finish")
    text = ok(run(home, "status", after, path=no_slurm_path)).stdout
    assert "waiting for the job(s) it depends on to finish" in text and "(from slurmrestd)" in text
    for job in (after, held):
        ok(run(home, "cancel", job, path=no_slurm_path))
    deadline = time.time() + 60
    while status(home, no_slurm_path, held)["state"] != "CANCELLED" and time.time() < deadline:
        time.sleep(1)
    assert status(home, no_slurm_path, held)["state"] == "CANCELLED"
    assert status(home, no_slurm_path, after)["state"] == "CANCELLED"
    assert json.loads((run_dir / "slurm-rest" / "connection.json").read_text())["url"] == "http://127.0.0.1:6820"


@pytest.mark.slow
def test_a_two_element_sweep_is_one_array(home, no_slurm_path):
    proc = run(home, "submit", "gpt2", "--profile", "dev-slurm-rest", "--preset", "tiny", "--layout", "1n1g", *SHORT,
               "--sbatch", "export=PYTHONPATH", "--sweep", "train.lr=2e-3,5e-3", "--max-parallel", "2", "--follow",
               path=no_slurm_path)
    ok(proc)
    sweep = proc.stdout.split()[2].rstrip(":")  # "submitted sweep 123: 2 elements ..."
    (entry,) = [j for j in json.loads(ok(run(home, "jobs", "--json", path=no_slurm_path)).stdout)
                if j["job_id"] == sweep]
    assert entry["state"] == "COMPLETED"
    assert [(e["job_id"], e["state"]) for e in entry["elements"]] == [(f"{sweep}_0", "COMPLETED"),
                                                                     (f"{sweep}_1", "COMPLETED")]
    for element in entry["elements"]:
        out = (Path(element["run_dir"]) / "logs" / f"job.{element['job_id']}.out").read_text()
        assert f"hpclaunch: job {element['job_id']} restart 0" in out
        assert sorted(losses(Path(element["run_dir"]))) == list(range(1, 9))


def test_a_wrong_token_is_a_clear_error(home, no_slurm_path):
    head, payload, _ = TOKEN.split(".")
    wrong = f"{head}.{payload}.{'A' * 43}"  # the same claims, not signed with the cluster's key
    runs = home / "runs"
    before = set(runs.iterdir()) if runs.is_dir() else set()
    proc = run(home, "submit", "allreduce", "--profile", "dev-slurm-rest", "--layout", "1n1g", path=no_slurm_path,
               token=wrong)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    # slurmctld hangs up on a token it cannot verify; slurmrestd 22.05 says so, with HTTP 500, not 401
    assert ("hpclaunch: error: slurmrestd refused POST http://127.0.0.1:6820/slurm/v0.0.38/job/submit: HTTP 500: "
            "Zero Bytes were transmitted or received (5005)") in text
    assert "hint: the token was refused: make a new one" in text and "Traceback" not in text
    assert wrong not in text and TOKEN not in text and payload not in text
    assert (set(runs.iterdir()) if runs.is_dir() else set()) == before  # a refused submit leaves no run directory
    job, _ = submitted(run(home, "submit", "allreduce", "--profile", "dev-slurm-rest", "--layout", "1n1g",
                           "--sbatch", "hold", path=no_slurm_path))
    for args in (("status", job), ("cancel", job), ("jobs",)):
        proc = run(home, *args, path=no_slurm_path, token=wrong)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 2 and "hpclaunch: error: slurmrestd refused" in text, (args, text)
        assert "Traceback" not in text and wrong not in text and payload not in text
    assert status(home, no_slurm_path, job)["state"] == "PENDING"  # the wrong token cancelled nothing
    ok(run(home, "cancel", job, path=no_slurm_path))
