"""python.stage / assets.stage node-local on the real dev cluster (docs/fast-start.md): the tiny GPT-2 on 2 nodes
runs its ranks from each node's copy of the packed environment and reads node-local copies of its assets, with
the losses of the same job on the shared paths; a second job finds the copies warm; a corrupt copy on one node
is found and copied again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.state import runfiles, timeline
from hpclaunch.state.runfiles import RunFiles
from tests.integration.test_recipes_tiny import QUICK, losses, submit

REPO = Path(__file__).resolve().parents[2]
TWO_NODES = ("--nodes", "2", "--gpus-per-node", "1", "--exclude", "node3,node4")  # the same two nodes each run
STEPS = ("--set", "train.max_steps=4")


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("nodelocal-home")


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> tuple[Path, Path]:
    """dev-slurm with node-local assets and its own node scratch (so the first job here is cold)."""
    folder = tmp_path_factory.mktemp("nodelocal-profile")
    scratch = folder / "scratch"
    text = (REPO / "cluster_profiles" / "dev-slurm.yaml").read_text()
    shared = "assets:\n  store: ~/.hpclaunch/assets\n  stage: shared\n"
    assert shared in text
    text = text.replace(shared, "assets:\n  store: ~/.hpclaunch/assets\n  stage: node-local\n")
    path = folder / "dev-slurm-nodelocal.yaml"
    path.write_text(text + f"node_scratch: {scratch}\n")
    return path, scratch


def _stage_lines(run_dir: Path) -> dict[str, str]:
    """node -> what its copy of the environment was (copied, warm, recopied), from the job's output."""
    out = "".join(p.read_text() for p in (run_dir / runfiles.LOGS).glob("job.*.out"))
    records = [json.loads(line) for line in out.splitlines() if line.startswith('{"node"')]
    return {r["node"]: r["result"] for r in records}


def _unpacked_by(run_dir: Path) -> dict[str, str]:
    """node -> the python that unpacked its broadcast copy of the environment, from the job's output."""
    out = "".join(p.read_text() for p in (run_dir / runfiles.LOGS).glob("job.*.out"))
    records = [json.loads(line) for line in out.splitlines() if line.startswith('{"node"')]
    return {r["node"]: r["python"] for r in records if r.get("via") == "broadcast"}


def _health_python(run_dir: Path) -> dict[str, Path]:
    """node -> the python that ran its health check (issue 38: not the shared one), from its health record."""
    records = [json.loads(p.read_text()) for p in (run_dir / "health").glob("node-*.restart-0.json")]
    return {r["host"].split(".")[0]: Path(r["python"]) for r in records}


def _rank_note(run_dir: Path, rank: int, what: str) -> str:
    log = RunFiles(run_dir).logs / runfiles.rank_log_name(rank, 0)
    (line,) = [x for x in log.read_text().splitlines() if x.startswith(f"hpclaunch: {what}: ")]
    return line.split(": ", 2)[2]


def _rank_python(run_dir: Path, rank: int) -> str:
    return _rank_note(run_dir, rank, "python environment")


def _run(home: Path, profile: Path, *extra: str) -> Path:
    return submit(home, "gpt2", *STEPS, *QUICK, *extra, profile=str(profile), extra=TWO_NODES)


@pytest.mark.slurm
@pytest.mark.slow
def test_node_local_env_and_assets_train_the_same_warm_and_recopied(home, profile):
    """Over 30 s: three 2-node runs (cold copy, warm, recopied) and the pack of the 1.8 GB environment."""
    path, scratch = profile
    shared = _run(home, REPO / "cluster_profiles" / "dev-slurm.yaml")
    cold = _run(home, path, "--set", "python.stage=node-local")
    assert losses(cold) == losses(shared) and len(losses(cold)) == 4
    assert _stage_lines(cold) == {"node1": "copied", "node2": "copied"}
    (entry,) = timeline.load(RunFiles(cold))
    phases = [p for p in timeline.PHASES if p in entry["phases"]]
    assert phases.index("env_packed") + 1 == phases.index("health_checked")  # the key known before the check
    assert phases.index("env_staged") == phases.index("health_checked") + 1 < phases.index("launched")
    # a cold node reads nothing of the shared python before its copy: the OS's runs its check and its unpack
    os_python = Path("/usr/bin/python3")
    assert _health_python(cold) == {"node1": os_python, "node2": os_python}
    assert _unpacked_by(cold) == {"node1": str(os_python), "node2": str(os_python)}
    for rank, node in ((0, "node1"), (1, "node2")):
        env = Path(_rank_python(cold, rank))
        assert env.parent == scratch / node / "envs", env  # each rank ran from its own node's copy
        # with the base interpreter (pyenv's, under $HOME: shared) and hpclaunch (this checkout) the copy carries
        base, src = _rank_note(cold, rank, "python interpreter").split("; hpclaunch: ")
        assert (Path(base), Path(src)) == (env / ".hpclaunch" / "python", env / ".hpclaunch" / "src" / "hpclaunch")
    assets = [scratch / node / "assets" / "generated" for node in ("node1", "node2")]
    assert all(sorted(p.name for p in a.iterdir()) == ["data", "models", "tokenizers"] for a in assets), assets

    warm = _run(home, path, "--set", "python.stage=node-local")
    assert _stage_lines(warm) == {"node1": "warm", "node2": "warm"}
    # a warm node checks its health with its copy's python
    key = Path(_rank_python(cold, 0)).name
    assert _health_python(warm) == {n: scratch / n / "envs" / key / "bin" / "python" for n in ("node1", "node2")}
    assert losses(warm) == losses(shared)

    env2 = Path(_rank_python(cold, 1))
    (env2 / "bin" / "torchrun").write_text("corrupt")  # one node's copy damaged between jobs
    (model,) = [p for p in (scratch / "node2" / "assets" / "generated" / "models").iterdir() if p.is_dir()]
    files = [f for f in model.rglob("*") if f.is_file() and not f.name.startswith(".")]
    victim = max(files, key=lambda f: f.stat().st_size)
    victim.write_bytes(b"corrupt")
    again = _run(home, path, "--set", "python.stage=node-local")
    assert _stage_lines(again) == {"node1": "warm", "node2": "recopied"}
    assert (env2 / "bin" / "torchrun").read_text().startswith(f"#!{env2}/bin/python")
    assert victim.stat().st_size > len(b"corrupt")
    assert losses(again) == losses(shared)
