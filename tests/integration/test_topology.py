"""Placement on the network, on a real Slurm that has a topology: the second dev cluster (scripts/dev-cluster-sid.sh,
Slurm 26.05) keeps its default partitions flat and places partition tree by two leaf switches of 2 nodes and
partition block by two blocks of 2 nodes (scripts/dev-cluster-sid/topology.yaml). hpclaunch reads that topology at
submit (the profile tests/fixtures/topology_profiles/dev-slurm-26-topology.yaml gives none), chooses from a job's
tensor-parallel groups (a dry run of Mixtral's tp preset on 1 device per node: groups of 2 span 2 nodes), and Slurm
runs what the script asks: one 2-node job of the torch-free stub recipe per partition, with the placement the
choice would make (--set topology.placement: the stub has no tensor parallelism of its own), starts and completes.
Cheap: two jobs of a few seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_slurm_newest import BIN, _up, slurm

REPO = Path(__file__).resolve().parents[2]
PROFILE = str(REPO / "tests" / "fixtures" / "topology_profiles" / "dev-slurm-26-topology.yaml")

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not _up(), reason="the second dev cluster is not up (scripts/dev-cluster-sid.sh up)")]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JWT", "SLURM_JWT_FILE", "SLURMRESTD_URL")}
    env.update(HPCLAUNCH_HOME=str(tmp_path_factory.mktemp("topology")), PYTHONPATH=str(REPO),
               HPCLAUNCH_PATH=str(REPO / "tests" / "fixtures"), PATH=f"{BIN}{os.pathsep}{env['PATH']}")
    return env


def hpclaunch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"hpclaunch {' '.join(args)}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc


@pytest.mark.parametrize("partition, asked, line, recorded", [
    ("tree", "--switches=1@1:00", "the job's 2 nodes fit one leaf switch of 2 (scontrol show topology): asked for "
                                  "one (switches=1@1:00, then any nodes)", "Switches=1@00:01:00"),
    ("block", "--segment=2", "every 2 nodes in one block of 2 (segment=2, scontrol show topology)", "SegmentSize=2"),
], ids=["tree", "block"])
def test_slurm_runs_the_placement_hpclaunch_read_and_chose(env, partition, asked, line, recorded):
    dry = hpclaunch(env, "submit", "mixtral", "--profile", PROFILE, "--partition", partition, "--preset", "tp",
                    "--layout", "2n1g", "--dry-run")
    assert "hpclaunch: topology: tensor-parallel groups of 2 devices span 2 nodes" in dry.stderr
    assert line in dry.stderr and f"#SBATCH {asked}\n" in dry.stdout
    placement = asked.removeprefix("--")
    done = hpclaunch(env, "submit", "stub", "--profile", PROFILE, "--partition", partition, "--preset", "short",
                     "--layout", "2n1g", "--set", f"topology.placement={placement}", "--set", "health.enabled=false",
                     "--follow")
    job = re.search(r"submitted job (\d+)", done.stdout + done.stderr)
    assert job, done.stdout + done.stderr
    shown = slurm("scontrol", "show", "job", job[1], "--oneliner").stdout
    assert "JobState=COMPLETED" in shown and f" {recorded} " in shown, shown  # Slurm took the request
    assert re.search(r" NodeList=sid\[(1-2|3-4)\] ", shown), shown  # the two nodes of one leaf switch / one block
