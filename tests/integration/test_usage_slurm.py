"""On the dev Slurm cluster (accounting on): `report --json` has the job's usage from sacct (elapsed vs the
requested time, CPU efficiency, peak memory vs the memory asked per node) and warns in words about what a tiny
job left unused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONPATH": str(REPO)})


@pytest.mark.slurm
@pytest.mark.slow
def test_report_has_the_usage_from_sacct_and_warns_about_unused_time(tmp_path):
    home = tmp_path / "home"
    proc = _cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", "dev-slurm", "--preset", "tiny",
                "--time", "00:30:00", "--set", "train.max_steps=8", "--set", "train.log_every=1",
                "--set", "train.save_every=0", "--follow", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE)
    assert job, proc.stdout[:1500] + "\n...\n" + proc.stdout[-500:]

    # slurmdbd records the steps (their TotalCPU) and the job's end a moment after the job ends, on a busy machine
    # some seconds later: wait until both the report and sacct itself have the figures, read in the same round
    deadline = time.monotonic() + 180
    while True:
        report = _cli(home, "report", job.group(1), "--json")
        assert report.returncode == 0, report.stderr
        used = json.loads(report.stdout)["usage"]
        sacct = subprocess.run(["sacct", "-n", "-X", "--parsable2", "--format=ElapsedRaw,TimelimitRaw",
                                f"--jobs={job.group(1)}"], capture_output=True, text=True, check=True).stdout
        fields = sacct.split()[0].split("|") if sacct.split() else []
        # the peak memory is there at once (the ranks' high-water marks, over sacct's sampled MaxRSS): wait for
        # the accounting's own figures
        if used.get("cpu_s") and len(fields) == 2 and all(f.isdigit() for f in fields):
            break
        assert time.monotonic() < deadline, (used, sacct)
        time.sleep(1)
    elapsed, limit = map(int, fields)
    assert used["source"] == "sacct" and used["state"] == "COMPLETED"
    assert used["elapsed_s"] == elapsed and used["time_limit_s"] == limit * 60 == 1800
    # TotalCPU over elapsed x AllocCPUS, as sacct has them (the dev cluster's nodes share two real cores and
    # confine nothing, so a short job's ranks can use more CPU time than it was allocated: no upper bound here)
    assert used["cpu_s"] > 0 and used["cpus"] >= 1
    assert used["cpu_efficiency"] == pytest.approx(used["cpu_s"] / (elapsed * used["cpus"]), abs=1e-3)
    assert used["max_rss_bytes"] > 50 * 2**20 and used["req_mem_per_node_bytes"] > used["max_rss_bytes"]
    assert any(w.startswith("the job ran ") and "of the time it asked for" in w for w in used["warnings"]), used

    text = _cli(home, "report", job.group(1)).stdout
    assert re.search(r"^usage \(sacct\): elapsed \d+:\d\d of 30:00 \(\d+%\), CPU efficiency \d+% of \d+ CPUs?, "
                     r"peak memory [\d.]+ [MG]iB of [\d.]+ GiB per node \(\d+%\)$", text, re.M), text
    assert "warning: the job ran " in text
