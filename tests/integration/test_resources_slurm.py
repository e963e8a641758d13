"""What a one-device job asks of the real dev cluster (issue 22, 3.1): Slurm's record of the job (`scontrol show
job`) holds what its script's #SBATCH lines say, a share of the node (dev-slurm: 1 CPU and 4 GiB for 4 devices,
so 1 CPU and 1G for one), and the job runs to COMPLETED with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.test_slurm_launch import env, needs_slurm, submit, wait_state  # noqa: F401


def _scontrol(job: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "--oneliner", job], capture_output=True, text=True,
                         check=True).stdout
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


@needs_slurm
@pytest.mark.slurm
def test_a_one_device_job_asks_slurm_what_its_script_says(env):  # noqa: F811
    sub = submit(env, "allreduce", "--profile", "dev-slurm", "--layout", "1n1g")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    script = (run_dir / "job.sbatch").read_text()
    asked = dict(line.removeprefix("#SBATCH --").partition("=")[::2] for line in script.splitlines()
                 if line.startswith("#SBATCH --"))
    assert {k: asked[k] for k in ("cpus-per-task", "mem", "gres", "nodes")} == {
        "cpus-per-task": "1", "mem": "1G", "gres": "gpu:1", "nodes": "1"}, asked
    assert "requeue" in asked and "exclusive" not in asked
    record = _scontrol(job)
    assert record["CPUs/Task"] == asked["cpus-per-task"]
    assert record["MinMemoryNode"] == asked["mem"]
    assert record["TresPerNode"] == f"gres:{asked['gres']}"
    assert record["NumNodes"].split("-")[0] == asked["nodes"]
    assert record["Requeue"] == "1"
    assert record["OverSubscribe"] != "NO"  # not exclusive: the node's other devices stay for other jobs
    seen = wait_state(env, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"})
    assert seen[-1] == "COMPLETED", (seen, (run_dir / "logs" / f"job.{job}.out").read_text())
    assert "OMP_NUM_THREADS=1" in script
