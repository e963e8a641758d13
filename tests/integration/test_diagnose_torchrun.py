"""`hpclaunch logs --diagnose` inside real torchrun jobs (local profile): a rank prints failure output recorded
from a real cluster (tests/fixtures/failures, SOURCES.md says where each came from) and exits 1 or aborts
(SIGABRT, as torch's NCCL watchdog does), so torchrun's real ChildFailedError summary ("Root Cause ... exitcode")
surrounds it. The diagnosis must name the rank's own evidence, not "exited without an error message"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# recorded file, rank that prints it, end (exit 1 or abort), expected: cause, operation, seq_num, timeout_ms
JOBS = {
    "nccl_watchdog": ("nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log", 0, "abort",
                      ("collective_timeout", "_REDUCE_SCATTER_BASE", 7753, 600000)),
    "hccl_ei0006": ("hccl/ei0006_hcclallreduce_vllm_ascend486.log", 1, "exit",
                    ("collective_timeout", "HcclAllreduce", None, None)),
    "nccl_internal": ("nccl_error/internal_error_vllm10453.log", 1, "exit", ("collective_error", None, None, None)),
    "xid": ("device_fault/xid79_line_nvsentinel155.log", 0, "exit", ("device_fault", None, None, None)),
}


def cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "HPCLAUNCH_PATH": str(FIXTURES)}
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One real 2-rank torchrun job per recorded output, all submitted before waiting for any."""
    home = tmp_path_factory.mktemp("home")
    ids = {}
    for key, (name, rank, end, _) in JOBS.items():
        args = ["--mode", "recorded", "--rank", str(rank), "--file", str(FIXTURES / "failures" / name)]
        args += ["--abort"] if end == "abort" else []
        done = cli(home, "submit", "failmodes", "--profile", "local", "--set", f"args={json.dumps(args)}",
                   "--parsable")
        assert done.returncode == 0, done.stderr
        ids[key] = done.stdout.strip()
    for job in ids.values():
        cli(home, "logs", job, "--follow")  # returns when the job has ended (exit 1: it failed, as it should)
    return home, ids


@pytest.mark.parametrize("key", sorted(JOBS))
def test_diagnosis_names_the_ranks_own_evidence(jobs: tuple[Path, dict[str, str]], key: str) -> None:
    home, ids = jobs
    name, rank, end, (cause, op, seq, timeout) = JOBS[key]
    done = cli(home, "logs", ids[key], "--diagnose", "--json")
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert d["state"] == "FAILED" and d["first_failure"]["rank"] == str(rank), d  # torchrun's own summary
    assert d["first_failure"]["exit"] == ("134" if end == "abort" else "1")
    assert (d["cause"], d["rank"], d["operation"], d["seq_num"], d["timeout_ms"]) == (cause, rank, op, seq, timeout), d
    assert d["file"].endswith(f"rank-{rank}.restart-0.log") and d["error"] in (FIXTURES / "failures" / name).read_text()
    if cause == "collective_timeout":  # the other rank never reported the timeout: it is the suspect
        assert d["suspect_ranks"] == [1 - rank] and f"--rank {1 - rank} --tail 50" in d["hint"]
    out = (home / "runs").glob(f"*/logs/job.{ids[key]}.out")
    assert "Root Cause (first observed failure)" in next(out).read_text()  # the real summary was there
    text = cli(home, "logs", ids[key], "--diagnose").stdout
    assert "without an error message" not in text and f"on rank {rank}" in text
