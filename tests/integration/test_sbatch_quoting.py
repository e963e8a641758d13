"""The #SBATCH lines hpclaunch writes are read back by a real sbatch as meant, hostile paths included
(sbatch parses those lines itself, not through a shell)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from hpclaunch.schedulers.slurm.scheduler import sbatch_options
from hpclaunch.submission.resolve import resolve
from tests.integration.waiting import Deadline


@pytest.mark.slurm
@pytest.mark.parametrize("folder", ["a b", "it's", "a'; echo foo", "$(touch PWNED)", "é猫"])
def test_sbatch_reads_quoted_output_paths(hpc_home, tmp_path, folder):
    spec = resolve("allreduce", "dev-slurm")
    run_dir = tmp_path / folder
    (run_dir / "logs").mkdir(parents=True)
    options = [o for o in sbatch_options(spec, run_dir) if not o.startswith(("--requeue", "--gres"))]
    script = tmp_path / "job.sbatch"
    script.write_text(
        "#!/bin/bash\n" + "".join(f"#SBATCH {o}\n" for o in options) + 'echo "ran $SLURM_JOB_ID"\n'
    )
    job = (
        subprocess.run(
            ["sbatch", "--parsable", str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    out = run_dir / "logs" / f"job.{job}.out"
    deadline = Deadline(120, [job])
    while not (out.is_file() and out.read_text().strip()):
        deadline.check(f"job {job} wrote no output")
        time.sleep(0.5)
    assert out.read_text().strip() == f"ran {job}"
    assert not list(Path(tmp_path).rglob("PWNED"))
