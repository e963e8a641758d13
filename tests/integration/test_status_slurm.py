"""`hpclaunch status` / `jobs` against the dev Slurm cluster: jobs that cannot start show their reason in
words; status works with accounting disabled; `jobs` asks the scheduler once for all records."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli.main import cli
from hpclaunch.core import cmd
from hpclaunch.schedulers.slurm.scheduler import SlurmScheduler
from hpclaunch.state import registry
from tests.integration.waiting import Deadline

NOACCT_CONF = Path(
    "/etc/slurm/slurm-noacct.conf"
)  # written by scripts/dev-cluster.sh: client-side, no accounting


def _cluster_up() -> bool:
    return (
        bool(shutil.which("sinfo"))
        and subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0
    )


pytestmark = [pytest.mark.slurm, pytest.mark.skipif(not _cluster_up(), reason="needs the dev Slurm cluster")]


def sbatch(*args: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", "--job-name=hpclaunch-status-test", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().split(";")[0]


def record(job_id: str, run_dir: Path, submitted_at: str | None = None) -> None:
    when = submitted_at or f"2026-11-22T07:00:{int(job_id) % 60:02d}+0000"
    registry.add(registry.JobRecord(job_id, "slurm", "dev-slurm", "raw", None, "torchrun", "1n1g", "raw",
                                    str(run_dir), when))


def status_json(job: str) -> dict:
    res = CliRunner().invoke(cli, ["status", job, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def wait_state(job: str, states: set[str], timeout: float = 60) -> dict:
    deadline = Deadline(timeout, [job])  # the time queued for nodes other tests' jobs hold not counted
    while True:
        s = SlurmScheduler().status([job])[job]
        if s.state in states:
            return s
        deadline.check(f"job {job} is {s.state}, not {states}")
        time.sleep(0.5)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path))
    return tmp_path


def test_jobs_that_cannot_start_show_why_in_words(home: Path) -> None:
    failed = sbatch("--wrap", "exit 3", "--output=/dev/null")
    held = sbatch("--hold", "--wrap", "true", "--output=/dev/null")
    too_big = sbatch("--nodes=5", "--wrap", "true", "--output=/dev/null")  # the partition has 4 nodes
    later = sbatch("--begin=now+1hour", "--wrap", "true", "--output=/dev/null")  # Slurm knows when it starts
    ids = [failed, held, too_big, later]
    try:
        wait_state(failed, {"FAILED"})
        never = sbatch(f"--dependency=afterok:{failed}", "--wrap", "true", "--output=/dev/null")
        ids.append(never)
        for j in ids:
            record(j, home / j)
        expect = {
            held: ("JobHeldUser", "held by its owner"),
            too_big: ("PartitionNodeLimit", "more nodes than"),
            never: ("DependencyNeverSatisfied", "can never start"),
        }
        deadline = Deadline(60)  # until the scheduler has evaluated the dependency (sched_interval=5 s)
        while status_json(never)["reason"] != "DependencyNeverSatisfied":
            deadline.check(f"job {never}'s reason is {status_json(never)['reason']}, not DependencyNeverSatisfied")
            time.sleep(0.5)
        for j, (code, text) in expect.items():
            s = status_json(j)
            assert (s["state"], s["reason"]) == ("PENDING", code), s
            assert text in s["reason_text"]
        out = CliRunner().invoke(cli, ["status", held]).output
        assert f"reason: JobHeldUser: held by its owner (`scontrol release {held}`)" in out
        starts = status_json(later)  # squeue's estimate of the start, next to the pending reason
        assert starts["reason"] == "BeginTime" and starts["expected_start"], starts
        assert f"expected to start: {starts['expected_start']}" in CliRunner().invoke(cli, ["status", later]).output
        hhmm = starts["expected_start"][11:16]
        row = next(r for r in CliRunner().invoke(cli, ["jobs"]).output.splitlines() if r.startswith(later))
        assert f"PENDING (BeginTime, ~{hhmm})" in row or f"~{starts['expected_start'][5:10]} {hhmm})" in row, row
        assert status_json(held)["expected_start"] is None  # a held job has no estimate
        assert f"job {failed}  FAILED (exit 3:0)" in CliRunner().invoke(cli, ["status", failed]).output
    finally:
        subprocess.run(["scancel", *ids], check=False)


def test_status_without_accounting(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not NOACCT_CONF.is_file():
        pytest.skip("scripts/dev-cluster.sh wrote no slurm-noacct.conf")
    done = sbatch("--wrap", "exit 3", "--output=/dev/null")
    ok = sbatch("--wrap", "true", "--output=/dev/null")
    wait_state(done, {"FAILED"})
    wait_state(ok, {"COMPLETED"})
    for j in (done, ok):
        record(j, home / j)
    # sacct now fails the way it does on a cluster without slurmdbd ("accounting storage is disabled")
    monkeypatch.setenv("SLURM_CONF", str(NOACCT_CONF))
    assert subprocess.run(["sacct", "-j", done], capture_output=True).returncode != 0
    found = SlurmScheduler().status([done, ok, "999999"])
    assert (found[done].state, found[done].exit_code, found[done].source) == ("FAILED", "3:0", "scontrol")
    assert (found[ok].state, found[ok].source) == ("COMPLETED", "scontrol")
    assert found["999999"].state == "UNKNOWN"
    assert status_json(done)["state"] == "FAILED"


def test_jobs_asks_the_scheduler_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sbatch("--wrap", "true", "--output=/dev/null")
    record(real, home / real)
    for i in range(500):
        record(str(900000 + i), home / str(i), f"2026-11-22T06:{i // 60:02d}:{i % 60:02d}+0000")
    calls: list[str] = []
    seam = cmd.run

    def counting(argv, **kw):  # noqa: ANN001, ANN003 - counts the real calls through the seam
        calls.append(argv[0])
        return seam(argv, **kw)

    monkeypatch.setattr(cmd, "run", counting)
    res = CliRunner().invoke(cli, ["jobs", "--limit", "0", "--json"], catch_exceptions=False)
    rows = json.loads(res.output)
    assert len(rows) == 501
    assert calls.count("squeue") == 1 and calls.count("sacct") <= 1 and calls.count("scontrol") <= 1, calls
    assert {r["job_id"]: r["state"] for r in rows}[real] != "UNKNOWN"


def test_exclusions_that_leave_too_few_nodes_are_refused_before_queueing(home: Path) -> None:
    """Suspects (and --exclude) that leave the partition fewer nodes than the job asks for: refused with the nodes
    named, not Slurm's bare "Requested node configuration is not available"; `hpclaunch suspects` shows and clears
    them."""
    from hpclaunch.state import suspects

    fixtures = str(Path(__file__).resolve().parents[1] / "fixtures")
    env = {"HPCLAUNCH_PATH": fixtures, "HPCLAUNCH_SCHEDULER": "slurm"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        suspects.remember(["node1", "node2", "node3"], "device error (Xid 79)", "4242")
        mp.delenv("HPCLAUNCH_SCHEDULER")
        res = CliRunner().invoke(cli, ["submit", "allreduce", "--profile", "dev-slurm", "--layout", "2n1g"])
        assert res.exit_code == 2, res.output
        assert "asks for 2 node(s) of partition debug" in res.output and "node1, node2, node3" in res.output, res.output
        assert not list(registry.all_records())  # nothing queued, nothing recorded
        shown = CliRunner().invoke(cli, ["suspects"]).output
        assert "node2" in shown and "device error (Xid 79)" in shown, shown
        assert CliRunner().invoke(cli, ["suspects", "--clear", "node2"]).exit_code == 0
        assert suspects.excluded("slurm") == ["node1", "node3"]
