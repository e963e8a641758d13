"""`hpclaunch profiles check` against the real dev cluster: what the profile says is held against sinfo, Lmod and
the Python environments, and (`--on-node`) against a node itself; a failed check exits 1 and says how to fix it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpclaunch.core.paths import bundled_root

pytestmark = pytest.mark.slurm
DEV = bundled_root() / "cluster_profiles" / "dev-slurm.yaml"


def rows(result) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads(result.stdout)}


def dev_profile(tmp_path: Path, name: str, **changes) -> Path:
    data = yaml.safe_load(DEV.read_text())
    for key, value in changes.items():
        where = data
        *parents, last = key.split(".")
        for p in parents:
            where = where.setdefault(p, {})
        where[last] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_dev_profile_passes_every_check(hpclaunch) -> None:
    res = hpclaunch("profiles", "check", "dev-slurm", "--json")
    assert res.exit_code == 0, res.output
    found = rows(res)
    assert all(r["ok"] for r in found.values()), found
    assert {"slurm commands", "partition debug", "partition debug GRES gpu", "modules.init",
            "module hpclaunch-dev/1.0", "python_envs.mindspore venv"} <= set(found)


def test_a_profile_for_another_cluster_fails_where_it_does_not_fit(hpclaunch) -> None:
    """The bundled guangzhou-a800 profile on this machine: no partition `gpu`, no /etc/profile.d/modules.sh,
    no conda. Before, `profiles check` said "valid / slurm commands: all found"."""
    res = hpclaunch("profiles", "check", "guangzhou-a800")
    assert res.exit_code == 1, res.output
    lines = {line.split("\t")[0]: line for line in res.stdout.splitlines()}
    assert "FAILED: not in sinfo (the cluster has: debug, long)" in lines["partition gpu"]
    assert "rename partitions.gpu" in lines["partition gpu"]
    assert "FAILED" in lines["modules.init"] and "/etc/profile.d/modules.sh does not exist" in lines["modules.init"]
    assert any(name.startswith("python conda") and "FAILED" in line for name, line in lines.items())
    assert "checks failed" in res.stderr


def test_missing_module_and_too_many_devices_are_named(hpclaunch, tmp_path: Path) -> None:
    path = dev_profile(tmp_path, "wrong", **{"modules.load": ["hpclaunch-dev/1.0", "nope/9.9"],
                                              "partitions.debug.gpus_per_node": 8})
    res = hpclaunch("profiles", "check", str(path), "--json")
    assert res.exit_code == 1, res.output
    found = rows(res)
    assert found["module hpclaunch-dev/1.0"]["ok"]
    assert not found["module nope/9.9"]["ok"] and "module -t avail nope" in found["module nope/9.9"]["fix"]
    gres = found["partition debug GRES gpu"]
    assert not gres["ok"] and gres["result"] == "4 per node (the profile says 8)"
    assert "gpus_per_node to 4" in gres["fix"]


def test_on_node_runs_the_jobs_setup_on_a_node(hpclaunch) -> None:
    res = hpclaunch("profiles", "check", "dev-slurm", "--on-node", "--json")
    assert res.exit_code == 0, res.output
    found = rows(res)
    assert found["on node (debug)"]["result"].startswith("ran on node")
    assert "hpclaunch 0.1.0" in found["on node: hpclaunch"]["result"]
    for package in ("torch", "transformers", "datasets", "deepspeed"):
        assert found[f"on node: {package}"]["ok"], found[f"on node: {package}"]
    assert found["on node: devices"]["result"].startswith("1 visible to the job")


def test_on_node_with_an_environment_without_hpclaunch_says_how_to_install_it(
        hpclaunch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the job sees only what the bare venv has
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    path = dev_profile(tmp_path, "bare", **{"python": {"venv": str(venv)}})
    res = hpclaunch("profiles", "check", str(path), "--on-node", "--json")
    assert res.exit_code == 1, res.output
    row = rows(res)["on node (debug)"]
    assert not row["ok"] and "No module named" in row["result"] and "install hpclaunch" in row["fix"]
