"""Seed 000's cross-cluster comparison, end to end on this machine: the `parity` preset run twice (as on two
clusters), one run carried as an `export-run` archive, `compare` of a job id against the archive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.integration.test_recipes_tiny import REPO, records

STEPS = ("--set", "train.max_steps=8")


def cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home)})


def test_parity_runs_compare_through_an_archive(tmp_path: Path) -> None:
    here, there = tmp_path / "cluster-a", tmp_path / "cluster-b"
    jobs = []
    for home, extra in ((here, ()), (there, ("--set", "train.threads_per_rank=1"))):
        done = cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", "local", "--preset", "parity",
                   *STEPS, *extra, "--parsable")
        assert done.returncode == 0, done.stderr
        job = done.stdout.strip()
        wait = cli(home, "logs", job, "--follow")
        assert wait.returncode == 0, wait.stdout[-2000:] + wait.stderr[-2000:]
        jobs.append(job)
    # "the other cluster" packs its run; the archive holds metrics, config, provenance, no checkpoints
    packed = cli(there, "export-run", jobs[1], "-o", str(tmp_path), "--json")
    assert packed.returncode == 0, packed.stderr
    archive = Path(json.loads(packed.stdout)["archive"])
    with tarfile.open(archive) as tar:
        names = {Path(n).relative_to(Path(n).parts[0]).as_posix() for n in tar.getnames() if "/" in n}
    assert {"resolved.yaml", "provenance.json", "metrics/rank-0.jsonl"} <= names
    assert not any(n.startswith("checkpoints") for n in names)

    res = cli(here, "compare", jobs[0], str(archive), "--json", "--tolerance", "1e-4")
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["common_steps"] == 8 and out["max_abs_diff"] <= 1e-4  # fp32, deterministic, same seed
    assert out["throughput_ratio"] > 0
    changed = {d["key"]: (d["a"], d["b"]) for d in out["config_differences"]}
    assert changed == {"recipe.train.threads_per_rank": (None, 1)}, changed
    ours = [r["loss"] for r in records(next((here / "runs").iterdir()))]
    assert len(ours) == 8 and ours[-1] < ours[0]
    text = cli(here, "compare", jobs[0], str(archive))
    assert "throughput ratio" in text.stdout and "config differences" in text.stdout
