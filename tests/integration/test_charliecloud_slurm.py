"""On the dev Slurm cluster, inside a real container: the tiny GPT-2 on 2 nodes through the bundled
dev-slurm-container profile (Charliecloud's ch-run; the image scripts/build-test-image.sh builds offline, unpacked
once per image on each node; the run directory and the asset store mounted) trains to the same losses as the same
job without the container, each node's launch runs inside the image (its Debian and its /opt/venv python, which
this machine does not have), and the timeline has the container's start."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.runtime.node.nodestage import MARKER
from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]
IMAGE_LINK = Path("/var/cache/hpclaunch/images/hpclaunch-test.sqfs")  # the profile's container.image
STAGE_DIR = Path("/tmp/hpclaunch-images")  # the nodes' ${TMPDIR:-/tmp}/hpclaunch-images (the dev cluster's share /tmp)
TINY = ("--preset", "tiny", "--nodes", "2", "--gpus-per-node", "1", "--exclude", "node3,node4",  # node1 named below
        "--set", "train.max_steps=4", "--set", "train.log_every=1", "--set", "train.save_every=0",
        "--set", "train.eval_steps=2")


def _cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HPCLAUNCH_HOME": str(home)})


def _train(home: Path, profile: str) -> tuple[str, dict, RunFiles]:
    proc = _cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", profile, *TINY, "--follow",
                timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE)
    assert job, proc.stdout[-2000:]
    status = json.loads(_cli(home, "status", job.group(1), "--json").stdout)
    return job.group(1), status, RunFiles(Path(status["run_dir"]))


def _losses(run: RunFiles) -> dict[int, float]:
    records = [json.loads(line) for line in run.metrics_file(0).read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if r["kind"] == "train"}


@pytest.mark.slurm
@pytest.mark.slow
def test_tiny_gpt2_in_a_charliecloud_container_on_two_nodes_matches_the_run_without(tmp_path):
    """Over 30 s: two 2-node trainings (in the container and without, to compare their losses) and the image's
    unpack on each node."""
    built = subprocess.run(["bash", str(REPO / "scripts" / "build-test-image.sh")], capture_output=True, text=True,
                           timeout=1800)
    assert built.returncode == 0, built.stderr[-3000:]
    assert IMAGE_LINK.resolve() == Path(built.stdout.strip())

    home = tmp_path / "home"  # one store: the tiny model made by the first job is read by the second
    _, _, plain = _train(home, "dev-slurm")
    # a copy of an earlier image on the nodes, last used 6 hours ago: inside the default 3 days, outside the
    # profile's node_scratch_keep_days (0.1, as each change to the sources is a new image of 1.2 GB)
    old = STAGE_DIR / f"hpclaunch-test-old-{os.getpid()}"
    (old / "usr").mkdir(parents=True)
    (old / MARKER).write_text("{}")
    os.utime(old / MARKER, (time.time() - 6 * 3600,) * 2)
    job, status, boxed = _train(home, "dev-slurm-container")

    output = boxed.job_output(job).read_text()
    assert not old.exists() and re.search(rf"removed \d+ node-local copies unused for more than 0.1 days from "
                                          rf"{STAGE_DIR}: [^\n]*{old.name}", output), output[-3000:]
    for node in (0, 1):  # printed from inside the container, right before the node's launch
        assert (f"hpclaunch: node {node} in the container: Debian GNU/Linux 12 (bookworm), python is "
                "/opt/venv/bin/python") in output, output[-3000:]
    assert not Path("/opt/venv").exists()  # the image's python: this machine has none there
    assert re.search(r"hpclaunch: image \S+hpclaunch-test\.sqfs (unpacked on|already on) node1 ", output), output
    (entry,) = status["timeline"]
    phases = entry["phases"]
    assert phases["launched"] < phases["container_started"] < phases["ranks_started"], phases
    assert "container" in entry["durations"]

    want, got = _losses(plain), _losses(boxed)
    assert sorted(got) == [1, 2, 3, 4]
    assert got == pytest.approx(want, rel=1e-5)
