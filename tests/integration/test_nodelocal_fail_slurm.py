"""Node-local staging that fails, on the real dev cluster (docs/fast-start.md#when-a-node-cannot-stage): node1's
local scratch is a 1 MiB tmpfs, mounted in node1's own mount namespace (each slurmd of the dev cluster has one:
scripts/dev-cluster.sh), so the packed python environment cannot be copied there while node2 has room. The tiny
GPT-2 on node1 + node2 with python.stage=node-local ends at once, FAILED, and `hpclaunch logs JOB --diagnose` names
node1 and the cause; with python.stage_fallback=shared the same job COMPLETES from the shared environment and says
so in its output, each node's rank log and its timeline."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpclaunch.state.runfiles import RunFiles
from tests.integration.test_slurm_launch import env, hpclaunch, needs_slurm, submit, wait_state  # noqa: F401
from tests.integration.waiting import LONG_S

pytestmark = [needs_slurm, pytest.mark.slurm, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
TINY = ("recipes/gpt2", "--preset", "tiny", "--nodes", "2", "--gpus-per-node", "1", "--exclude", "node3,node4",
        "--set", "train.max_steps=2", "--set", "train.log_every=1", "--set", "train.eval_every=0",
        "--set", "train.save_every=0", "--set", "health.enabled=false", "--set", "python.stage=node-local")


def _on_node1(*cmd: str) -> subprocess.CompletedProcess[str]:
    """A command in node1's mount namespace: a one-task Slurm step there (it waits while other tests' jobs fill
    node1: the suite runs on several workers)."""
    return subprocess.run(["srun", "-N1", "-w", "node1", "-t", "1", "-J", "hpclaunch-test-scratch", *cmd],
                          capture_output=True, text=True, timeout=LONG_S)


@pytest.fixture(scope="module")
def small_scratch(tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """dev-slurm with node_scratch SCRATCH, where SCRATCH/node1 is a 1 MiB tmpfs on node1 only: (profile, SCRATCH)."""
    folder = tmp_path_factory.mktemp("stagefail")
    scratch = folder / "scratch"
    (scratch / "node1").mkdir(parents=True)
    profile = folder / "dev-slurm-small-scratch.yaml"
    profile.write_text((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text() + f"node_scratch: {scratch}\n")
    mounted = _on_node1("mount", "-t", "tmpfs", "-o", "size=1m", "hpclaunch-small-scratch", str(scratch / "node1"))
    assert mounted.returncode == 0, mounted.stderr
    try:
        yield profile, scratch
    finally:
        _on_node1("umount", str(scratch / "node1"))


def _output(run_dir: Path) -> str:
    return "".join(p.read_text() for p in RunFiles(run_dir).job_outputs())


def test_a_node_without_room_ends_the_job_and_diagnose_names_the_node_and_the_cause(env, small_scratch):  # noqa: F811
    profile, scratch = small_scratch
    sub = submit(env, *TINY, "--profile", str(profile))
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=300)
    assert seen[-1] == "FAILED", seen
    (entry,) = json.loads(hpclaunch(env, "status", job, "--json").stdout)["timeline"]
    assert "launched" not in entry["phases"] and "env_staged" not in entry["phases"]  # ended before the launch
    assert not RunFiles(run_dir).rank_logs()

    text = hpclaunch(env, "logs", job, "--diagnose").stdout
    assert "cause: not enough local scratch on node1 for the node-local copy" in text, text
    assert "node: node1" in text and "GiB free, the copy needs" in text, text
    assert "python.stage_fallback: shared" in text and "node_scratch" in text, text
    d = json.loads(hpclaunch(env, "logs", job, "--diagnose", "--json").stdout)
    assert (d["cause"], d["node"]) == ("stage_no_space", "node1"), d
    # nothing half-written on node1: no copy, no temporary folder (the stager's empty lock files stay: removing a
    # lock file another process may hold open is a race)
    left = _on_node1("find", str(scratch / "node1"), "-mindepth", "2", "!", "-name", ".*.lock", "!", "-name", ".*.use")
    assert left.returncode == 0 and left.stdout.strip() == "", left.stdout


def test_with_the_fallback_the_job_completes_from_the_shared_environment_and_says_so(env, small_scratch):  # noqa: F811
    profile, scratch = small_scratch
    sub = submit(env, *TINY, "--profile", str(profile), "--set", "python.stage_fallback=shared")
    job, run_dir = sub["job_id"], Path(sub["run_dir"])
    seen = wait_state(env, job, ENDED, timeout=600)
    assert seen[-1] == "COMPLETED", (seen, _output(run_dir)[-3000:])

    out = _output(run_dir)
    assert "hpclaunch: warning: node node1: " in out and "GiB free, the copy needs" in out, out[-3000:]
    assert ("hpclaunch: warning: a node could not copy the python environment to its local scratch (above); "
            "python.stage_fallback shared: every node runs the ranks from the shared python environment") in out
    for node in ("node1", "node2"):
        assert f"hpclaunch: warning: node {node}: the ranks run from the shared python environment" in out
    for log in RunFiles(run_dir).rank_logs():  # one rank per node: each names the shared environment and why
        first = log.path.read_text().splitlines()[0]
        assert first.startswith("hpclaunch: python environment: ") and str(scratch) not in first, first
        assert "(the shared one: python.stage_fallback shared, a node could not copy" in first, first

    status = json.loads(hpclaunch(env, "status", job, "--json").stdout)
    (entry,) = status["timeline"]
    assert "env_fallback" in entry["phases"] and "env_staged" not in entry["phases"], entry
    assert "env staging failed " in hpclaunch(env, "status", job).stdout
    assert "cause: the job completed" in hpclaunch(env, "logs", job, "--diagnose").stdout
