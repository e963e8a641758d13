"""`report`'s usage from the job's own samples (hpclaunch/runtime/node/sampler.py): a GPT-2 tiny job on the local
scheduler (no accounting) gets its CPU time, CPUs and peak memory from the node supervisor's samples, and its
devices' utilisation and memory from nvidia-smi: on this GPU-less machine a stand-in nvidia-smi on PATH
answering in nvidia-smi's CSV format (tests/fixtures/fake-nvidia). Without it the report says CPU only. A short
torchrun job (tests/fixtures/recipes/failmodes, metrics mode) gets them from npu-smi or mthreads-gmi: stand-ins
that print those tools' recorded output (tests/fixtures/fake-npu, fake-mthreads; tests/fixtures/device-tools)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "fixtures" / "fake-nvidia"
TOOLS = ("nvidia-smi", "npu-smi", "mthreads-gmi")


def _cli(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HPCLAUNCH_HOME": str(home), **(env or {})})


def _job(home: Path, env: dict, *recipe: str) -> tuple[str, Path]:
    recipe = recipe or (str(REPO / "recipes" / "gpt2"), "--preset", "tiny", "--set", "train.max_steps=12",
                        "--set", "train.save_every=0")
    proc = _cli(home, "submit", *recipe, "--profile", "local", "--follow",
                env={"HPCLAUNCH_SAMPLE_INTERVAL": "1", **env})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = re.search(r"^submitted job (\S+) ", proc.stdout, re.M)
    run_dir = re.search(r"^run directory: (\S+)", proc.stdout, re.M)
    assert job and run_dir, proc.stdout
    return job.group(1), Path(run_dir.group(1))


@pytest.mark.slow
def test_report_has_cpu_memory_and_device_usage_from_the_jobs_samples(tmp_path):
    home = tmp_path / "home"
    path = f"{FAKE}{os.pathsep}{os.environ['PATH']}"
    job, run_dir = _job(home, {"PATH": path, "FAKE_GPU_UTIL": "30", "FAKE_GPU_MEM_MIB": "2048",
                               "FAKE_GPU_POWER_W": "300"})
    samples = [json.loads(line) for line in (run_dir / "usage" / "node-0.restart-0.jsonl").read_text().splitlines()]
    assert len(samples) >= 2 and samples[-1]["cpu_s"] >= samples[0]["cpu_s"]
    assert samples[0]["tool"] == "nvidia-smi" and len(samples[0]["devices"]) == 2

    report = _cli(home, "report", job, "--json")
    assert report.returncode == 0, report.stderr
    used = json.loads(report.stdout)["usage"]
    assert used["source"] == "samples" and used["state"] == "COMPLETED"
    assert used["cpu_s"] > 1 and used["cpus"] >= 1 and used["nodes"] == 1
    assert used["cpu_efficiency"] == pytest.approx(used["cpu_s"] / (used["elapsed_s"] * used["cpus"]), abs=1e-3)
    assert used["max_rss_bytes"] > 100 * 2**20  # two ranks and torchrun, each with torch loaded
    dev = used["devices"]
    assert (dev["source"], dev["count"]) == ("nvidia-smi", 2) and dev["samples"] == 2 * len(samples)
    assert dev["mean_utilization"] == pytest.approx(0.30)
    assert dev["peak_memory_bytes"] == 2048 * 2**20 and dev["memory_total_bytes"] == 81559 * 2**20
    assert any("device(s) 30% busy on average" in w for w in dev["warnings"])
    # the energy: the power draw the job's own sampler read (report/energy.py), 2 devices x 300 W x elapsed
    spent = json.loads(report.stdout)["energy"]
    assert spent["energy_source"] == "samples" and spent["power_samples"] == 2 * len(samples)
    assert spent["energy_kwh"] == pytest.approx(2 * 300 * used["elapsed_s"] / 3.6e6, abs=1e-6)
    assert spent["device_hours"] == pytest.approx(2 * used["elapsed_s"] / 3600, abs=1e-6)
    assert spent["tokens_per_kwh"] and spent["tokens_per_kwh"] > 0

    text = _cli(home, "report", job).stdout
    assert "usage (samples): elapsed " in text and "CPU efficiency " in text and "peak memory " in text
    assert "devices: 2 device(s) (nvidia-smi, " in text and "utilisation 30% on average" in text
    assert "warning: the job kept its 2 device(s) 30% busy on average" in text


@pytest.mark.slow
def test_without_a_device_tool_the_report_says_cpu_only(tmp_path):
    home = tmp_path / "home"
    job, _ = _job(home, {})
    used = json.loads(_cli(home, "report", job, "--json").stdout)["usage"]
    assert used["source"] == "samples" and used["cpu_s"] > 1
    assert used["devices"]["source"] is None and "CPU only" in used["devices"]["note"]


@pytest.mark.parametrize(("tool", "count", "total_mib", "peak_mib"),
                         [("npu-smi", 8, 65536, 58114), ("mthreads-gmi", 3, 81920, 66641)])
def test_report_has_device_usage_from_npu_smi_and_mthreads_gmi(tmp_path, tool, count, total_mib, peak_mib):
    home = tmp_path / "home"
    fake = REPO / "tests" / "fixtures" / {"npu-smi": "fake-npu", "mthreads-gmi": "fake-mthreads"}[tool]
    path = os.pathsep.join([str(fake), *(p for p in os.environ["PATH"].split(os.pathsep)
                                         if p and not any(Path(p, t).exists() for t in TOOLS))])
    job, run_dir = _job(home, {"PATH": path}, str(REPO / "tests" / "fixtures" / "recipes" / "failmodes"),
                        "--preset", "metrics")
    samples = [json.loads(line) for line in (run_dir / "usage" / "node-0.restart-0.jsonl").read_text().splitlines()]
    assert samples and {s["tool"] for s in samples} == {tool} and len(samples[0]["devices"]) == count

    dev = json.loads(_cli(home, "report", job, "--json").stdout)["usage"]["devices"]
    assert (dev["source"], dev["count"], dev["samples"]) == (tool, count, count * len(samples))
    assert dev["peak_memory_bytes"] == peak_mib * 2**20 and dev["memory_total_bytes"] == total_mib * 2**20
    assert f"devices: {count} device(s) ({tool}, " in _cli(home, "report", job).stdout
