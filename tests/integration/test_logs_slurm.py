"""Real jobs on the dev Slurm cluster: a rank that raises, a port clash and a missing offline asset are
diagnosed; logs stay complete across a requeue; report/compare on metrics written by a real job."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli.main import cli
from hpclaunch.schedulers.slurm.scheduler import SlurmScheduler
from tests.integration.waiting import LONG_S, Deadline, start_now

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def cluster_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0


needs_slurm = pytest.mark.skipif(
    not cluster_up(), reason="needs the dev Slurm cluster (scripts/dev-cluster.sh up)"
)


def submit(*args: str) -> dict:
    res = CliRunner().invoke(
        cli, ["submit", *args, "--profile", "dev-slurm", "--json"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.output.strip().splitlines()[-1])


def wait(job_ids: list[str], timeout: float = 300, until=lambda s: s.finished) -> dict:  # noqa: ANN001
    """Until every job is `until` (ended); `timeout` not counting their time queued for nodes."""
    sched = SlurmScheduler()
    deadline = Deadline(timeout, job_ids)
    while True:
        found = sched.status(job_ids)
        if all(until(found[j]) for j in job_ids):
            return found
        deadline.check(f"jobs did not get there: {found}")
        time.sleep(1)


def cli_json(*args: str) -> dict | list:
    res = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


pytestmark = [pytest.mark.slurm, needs_slurm]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    mp = pytest.MonkeyPatch()
    mp.setenv("HPCLAUNCH_HOME", str(tmp_path_factory.mktemp("home")))
    mp.setenv("HPCLAUNCH_PATH", str(FIXTURES))
    out = {p: submit("failmodes", "--preset", p) for p in ("raise", "port", "asset", "metrics")}
    out["metrics2"] = submit("failmodes", "--preset", "metrics")
    out["timeout"] = submit("allreduce", "--preset", "slow", "--set", "time=00:01:00")  # sleeps 300 s
    # not the timeout job: its test (the module's last) waits for it, so the tests before run meanwhile
    wait([j["job_id"] for name, j in out.items() if name != "timeout"])
    yield out
    mp.undo()


@pytest.mark.parametrize(
    "preset,cause,rank,error",
    [
        ("raise", "python_error", 1, "ValueError: bad batch shape on rank 1"),
        ("port", "port_in_use", 0, "EADDRINUSE"),
        ("asset", "asset_missing", 1, "LocalEntryNotFoundError"),
    ],
)
def test_failed_job_is_diagnosed(jobs: dict, preset: str, cause: str, rank: int, error: str) -> None:
    job = jobs[preset]["job_id"]
    d = cli_json("logs", job, "--diagnose")
    assert (d["state"], d["cause"], d["rank"]) == ("FAILED", cause, rank), d
    assert error in d["error"] and d["file"].endswith(f"rank-{rank}.restart-0.log")
    assert d["first_failure"]["rank"] == str(rank)
    text = CliRunner().invoke(cli, ["logs", job, "--diagnose"]).output
    assert f"on rank {rank}" in text and "hint:" in text


def test_logs_prefix_every_rank_line(jobs: dict) -> None:
    out = CliRunner().invoke(cli, ["logs", jobs["raise"]["job_id"], "--grep", "all-reduce gave"]).output
    assert sorted(out.splitlines()) == [
        "[rank0] rank 0: all-reduce gave 2",
        "[rank1] rank 1: all-reduce gave 2",
    ]


def test_report_and_compare_on_real_metrics(jobs: dict) -> None:
    from PIL import Image

    a, b = jobs["metrics"], jobs["metrics2"]
    info = cli_json("report", a["job_id"])
    lines = [
        json.loads(ln) for ln in (Path(a["run_dir"]) / "metrics" / "rank-0.jsonl").read_text().splitlines()
    ]
    train = [r for r in lines if "loss" in r]
    metric_plots = [p for p in info["plots"] if Path(p).stem in ("loss", "lr", "tokens_per_s")]  # not timeline
    for png, key in zip(metric_plots, ("loss", "lr", "tokens_per_s"), strict=True):
        plotted = json.loads(Image.open(png).text["Description"])
        assert plotted == {"step": [r["step"] for r in train], key: [r[key] for r in train]}
    assert info["steps"] == 20 and info["eval_loss"] == 0.3
    diff = cli_json("compare", a["job_id"], b["job_id"])
    assert diff["max_abs_diff"] == 0 and diff["common_steps"] == 20 and Path(diff["plot"]).is_file()


def test_logs_complete_across_a_requeue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of the job (before and after the requeue), each a torch start-up on two ranks."""
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path))
    monkeypatch.setenv("HPCLAUNCH_PATH", str(FIXTURES))
    # the job sleeps long enough to be requeued while it runs (the requeue ends that run); the test then lets the
    # second run end: the file `short` in the run directory tells the ranks to sleep no more
    job = submit("allreduce", "--set", 'args=["--sleep","600","--sleep-unless-exists","short"]')
    jid, run = job["job_id"], Path(job["run_dir"])
    deadline = Deadline(240, [jid])
    while not all(
        (run / "logs" / f"rank-{r}.restart-0.log").is_file()
        and b"reduced=" in (run / "logs" / f"rank-{r}.restart-0.log").read_bytes()
        for r in (0, 1)
    ):
        deadline.check("the ranks did not start")
        time.sleep(1)
    subprocess.run(["scontrol", "requeue", jid], check=True)
    (run / "short").touch()
    start_now(jid)
    wait([jid], timeout=300)
    names = sorted(p.name for p in (run / "logs").glob("rank-*.log"))
    assert names == [
        "rank-0.restart-0.log",
        "rank-0.restart-1.log",
        "rank-1.restart-0.log",
        "rank-1.restart-1.log",
    ]
    out = CliRunner().invoke(cli, ["logs", jid, "--grep", "reduced="]).output.splitlines()
    assert out[0] == "==> restart 0 <==" and "==> restart 1 <==" in out
    assert sum("reduced=3" in ln for ln in out) == 4  # both ranks, both runs
    d = cli_json("logs", jid, "--diagnose")
    assert d["restarts"] == [0, 1] and d["cause"] is None and d["state"] == "COMPLETED"


def test_follow_streams_a_running_job_until_it_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path))
    monkeypatch.setenv("HPCLAUNCH_PATH", str(FIXTURES))
    job = submit("allreduce", "--set", 'args=["--sleep","3"]')
    proc = subprocess.run(
        [sys.executable, "-m", "hpclaunch.cli.main", "logs", job["job_id"], "--follow", "--grep", "reduced="],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=LONG_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(ln.split()[0] for ln in proc.stdout.splitlines()) == ["[rank0]", "[rank1]"]
    assert SlurmScheduler().status([job["job_id"]])[job["job_id"]].state == "COMPLETED"


def test_time_limit_is_diagnosed(jobs: dict) -> None:
    """Last in the module: its job runs into its 1-minute limit while the tests above run.
    Over 30 s when it waits: the job needs its 1-minute limit to run out.
    """
    wait([jobs["timeout"]["job_id"]])
    d = cli_json("logs", jobs["timeout"]["job_id"], "--diagnose")
    assert (d["state"], d["cause"], d["rank"]) == ("TIMEOUT", "slurm_timeout", None), d
    assert "DUE TO TIME LIMIT" in d["error"] and d["file"].endswith(f"job.{jobs['timeout']['job_id']}.out")
