"""provenance.json on real runs of the local profile: submit records the original recipe folder's git state
and the assets, the job adds packages, modules, nodes, devices and environment; `status` shows one line of
it and `compare` lists what differs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from hpclaunch.state.runfiles import RunFiles

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


@pytest.fixture
def dirty_recipe(tmp_path: Path) -> tuple[Path, str]:
    """The allreduce recipe in a git repository of its own, committed, then changed."""
    repo = tmp_path / "myrecipes"
    shutil.copytree(FIXTURES / "recipes" / "allreduce", repo / "allreduce")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "recipe")
    with open(repo / "allreduce" / "allreduce.py", "a") as f:
        f.write("# tuned by hand\n")
    return repo / "allreduce", _git(repo, "rev-parse", "HEAD")


def _run(hpclaunch, *args: str) -> tuple[str, Path]:
    result = hpclaunch("submit", *args, "--profile", "local", "--follow", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout.splitlines()[0])
    return info["job_id"], Path(info["run_dir"])


def _provenance(run_dir: Path) -> dict:
    """The job writes its part in the background: wait for it (it starts with the job, so it is long done)."""
    path = RunFiles(run_dir).provenance
    data = json.loads(path.read_text())
    for _ in range(100):
        if "packages" in data:
            break
        time.sleep(0.1)
        data = json.loads(path.read_text())
    return data


def test_a_real_local_run_records_what_it_ran_with(hpclaunch, dirty_recipe, tmp_path, monkeypatch):
    folder, commit = dirty_recipe
    bin_dir = tmp_path / "bin"  # a node with two GPUs, as nvidia-smi reports them
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 550.54.15'\n"
                                        "echo 'NVIDIA H100 80GB HBM3, 550.54.15'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HF_TOKEN", "hf_very_secret")
    monkeypatch.setenv("SLURM_JWT", "eyJ.very.secret")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("LOADEDMODULES", "gcc/12.2:cuda/12.4")
    monkeypatch.setenv("LMOD_CMD", "/usr/share/lmod/lmod/libexec/lmod")

    job_id, run_dir = _run(hpclaunch, str(folder))
    p = _provenance(run_dir)

    assert p["hpclaunch_version"] == __import__("hpclaunch").__version__
    assert p["recipe"]["source"] == str(folder)  # the original folder, not the run directory's copy
    git = p["recipe"]["git"]
    assert git["commit"] == commit and git["dirty"] is True and "+# tuned by hand" in git["diff"]
    assert p["packages"]["torch"] == metadata.version("torch")
    assert p["packages"]["click"] == metadata.version("click")
    assert p["modules"] == {"system": "lmod", "loaded": ["gcc/12.2", "cuda/12.4"]}
    assert p["nodes"]["nodelist"] == socket.gethostname() and p["nodes"]["count"] == 1
    assert p["devices"] == {"tool": "nvidia-smi", "models": ["NVIDIA H100 80GB HBM3"], "driver": "550.54.15",
                            "count": 2}
    env = p["env"]
    assert env["HF_TOKEN"] == "<redacted>" and "hf_very_secret" not in RunFiles(run_dir).provenance.read_text()
    assert env["SLURM_JWT"] == "<redacted>" and "eyJ.very.secret" not in RunFiles(run_dir).provenance.read_text()
    assert env["NCCL_DEBUG"] == "INFO" and env["OMP_NUM_THREADS"] == "1" and env["HPCLAUNCH_JOB_ID"] == job_id
    assert p["job"]["job_id"] == job_id and p["job"]["restart"] == 0

    status = hpclaunch("status", job_id)
    line = next(x for x in status.stdout.splitlines() if x.strip().startswith("provenance:"))
    assert f"recipe {commit[:10]} (dirty)" in line and f"torch {metadata.version('torch')}" in line
    assert "modules gcc/12.2 cuda/12.4" in line and "2 x NVIDIA H100 80GB HBM3 (driver 550.54.15)" in line
    assert hpclaunch("status", job_id, "--json").stdout.count("(dirty)") == 1


def test_a_cpu_node_says_so_and_compare_lists_what_differs(hpclaunch, hpc_home, monkeypatch):
    # failmodes:metrics writes metrics, so that compare has losses to compare first
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    monkeypatch.setenv("PATH", ":".join(p for p in os.environ["PATH"].split(":")
                                        if not any(Path(p, t).exists() for t in ("nvidia-smi", "npu-smi",
                                                                                 "mthreads-gmi"))))
    job_a, run_a = _run(hpclaunch, "failmodes", "--preset", "metrics")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    job_b, run_b = _run(hpclaunch, "failmodes", "--preset", "metrics")

    devices = _provenance(run_a)["devices"]
    assert devices["tool"] is None and devices["count"] == 0 and "CPU only" in devices["note"]
    _provenance(run_b)
    result = hpclaunch("compare", job_a, job_b)
    assert result.exit_code == 0, result.output
    listed = result.stdout.split(f"provenance differences ({job_a} -> {job_b}):")[1]
    assert "env.NCCL_ALGO: (absent) -> Ring" in listed
    assert "HPCLAUNCH_JOB_ID" not in listed and "started_at" not in listed  # per-run values are no difference
    data = json.loads(hpclaunch("compare", job_a, job_b, "--json").stdout)
    assert {"key": "env.NCCL_ALGO", "a": None, "b": "Ring"} in data["provenance_differences"]
    same = hpclaunch("compare", job_a, job_a)
    assert "provenance: no differences" in same.stdout


def test_submit_records_each_asset_with_its_manifest_sha256(hpc_home, tmp_path):
    from hpclaunch.assets.store import MANIFEST, Manifest, asset_path, write_manifest
    from hpclaunch.submission.provenance import submit_part
    from hpclaunch.submission.resolve import resolve

    profile = yaml.safe_load((Path(__file__).resolve().parents[2] / "cluster_profiles" / "local.yaml").read_text())
    profile["assets"] = {"store": str(tmp_path / "store")}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(profile))
    spec = resolve("gpt2", str(tmp_path / "mine.yaml"))
    folder = asset_path(tmp_path / "store", "model", "gpt2", "main")
    folder.mkdir(parents=True)
    write_manifest(folder, Manifest("gpt2", "model", "main", "607a30d783dfa663caf39e06633721c8d4cfcd7e", "hub",
                                    "2026-11-01"))
    assets = {(a["kind"], a["repo_id"]): a for a in submit_part(spec)["assets"]}
    model = assets[("model", "gpt2")]
    assert model["revision"] == "main" and model["commit"] == "607a30d783dfa663caf39e06633721c8d4cfcd7e"
    assert model["manifest_sha256"] == hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
    dataset = assets[("dataset", "Salesforce/wikitext")]  # not staged: no manifest to hash
    assert dataset["manifest_sha256"] is None and dataset["commit"] is None


def test_a_recipe_outside_git_and_a_large_diff(tmp_path):
    from hpclaunch.submission.provenance import MAX_DIFF_BYTES, recipe_git

    plain = tmp_path / "plain"
    plain.mkdir()
    assert recipe_git(plain) is None
    _git(plain, "init", "-q")
    (plain / "train.py").write_text("x = 1\n")
    _git(plain, "add", ".")
    _git(plain, "commit", "-qm", "one")
    assert recipe_git(plain) == {"commit": _git(plain, "rev-parse", "HEAD"), "dirty": False}
    (plain / "train.py").write_text("x = 2\n" * MAX_DIFF_BYTES)
    (plain / "notes.txt").write_text("new\n")
    git = recipe_git(plain)
    assert git is not None and git["dirty"] and git["diff"] is None and git["diff_bytes"] > MAX_DIFF_BYTES
    assert git["untracked"] == ["notes.txt"]
