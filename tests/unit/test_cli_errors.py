"""Bad input through the CLI: each exits 2 with one clear message, no traceback, nothing submitted and
no run directory left behind.

Every case is a real submit (no --dry-run) on the Slurm profile dev-slurm, run with a PATH that holds
no sbatch: even a test that went wrong could not queue a job.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_sbatch_path(tmp_path, monkeypatch):
    """PATH with bash and coreutils but no Slurm commands."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "sh", "env"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


def _profile_file(tmp_path: Path, **over) -> Path:
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    for key, value in over.items():
        node = data
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    path = tmp_path / "bad-profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _recipe_dir(tmp_path: Path, **over) -> Path:
    src = REPO / "tests" / "fixtures" / "recipes" / "allreduce"
    dst = tmp_path / "badrecipe"
    shutil.copytree(src, dst)
    data = yaml.safe_load((dst / "recipe.yaml").read_text())
    data.update(over)
    (dst / "recipe.yaml").write_text(yaml.safe_dump(data))
    return dst


def _assert_clean_failure(result, hpc_home: Path, *expected: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    err = result.stderr
    assert "Traceback" not in result.output
    assert err.startswith("hpclaunch: error: "), err
    assert len(err.strip().splitlines()) <= 2, f"more than one message (and a hint): {err}"
    for text in expected:
        assert text in err, f"{text!r} not in {err!r}"
    assert result.stdout == ""
    runs = hpc_home / "runs"
    assert not runs.exists() or not any(runs.iterdir()), f"left behind: {list(runs.iterdir())}"
    registry = hpc_home / "registry"
    assert not registry.exists() or not list(registry.glob("*.json")), "a job was recorded"


def test_unknown_profile(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch("submit", "allreduce", "--profile", "nope")
    _assert_clean_failure(
        result,
        hpc_home,
        "unknown profile 'nope'; available: ",
        "dev-slurm, dev-slurm-26, dev-slurm-26-rest, dev-slurm-container, dev-slurm-rest, dev-slurm-ssh, "
        "guangzhou-a800, local, local-cuda, musa-s4000",
    )


def test_unknown_key_in_profile(hpclaunch, hpc_home, no_sbatch_path, tmp_path):
    path = _profile_file(tmp_path, **{"partitions.debug.max_nodez": 3})
    result = hpclaunch("submit", "allreduce", "--profile", str(path))
    _assert_clean_failure(
        result, hpc_home, f"{path}: partitions.debug.max_nodez: unknown key; valid keys: ", "max_nodes"
    )


def test_unknown_key_in_recipe(hpclaunch, hpc_home, no_sbatch_path, tmp_path):
    folder = _recipe_dir(tmp_path, trian={"lr": 0.1})
    result = hpclaunch("submit", str(folder), "--profile", "dev-slurm")
    _assert_clean_failure(
        result, hpc_home, f"{folder / 'recipe.yaml'}: trian: unknown key; valid keys: ", "train"
    )


def test_wrong_type(hpclaunch, hpc_home, no_sbatch_path, tmp_path):
    folder = _recipe_dir(tmp_path, train={"max_steps": "forever"})
    result = hpclaunch("submit", str(folder), "--profile", "dev-slurm")
    _assert_clean_failure(result, hpc_home, "train.max_steps: Input should be a valid integer", "'forever'")


def test_wrong_type_in_profile(hpclaunch, hpc_home, no_sbatch_path, tmp_path):
    path = _profile_file(tmp_path, **{"partitions.debug.gpus_per_node": "four"})
    result = hpclaunch("submit", "allreduce", "--profile", str(path))
    _assert_clean_failure(result, hpc_home, "partitions.debug.gpus_per_node: Input should be a valid integer")


@pytest.mark.parametrize(
    "flags, expected",
    [
        (
            ["--layout", "5n4g"],
            "layout 5n4g asks for 5 nodes, but partition 'debug' of profile 'dev-slurm' allows at most 4",
        ),
        (
            ["--nodes", "1", "--gpus-per-node", "8"],
            "asks for 8 GPUs per node, but partition 'debug' of profile 'dev-slurm' has 4 per node",
        ),
    ],
)
def test_layout_larger_than_the_partition(hpclaunch, hpc_home, no_sbatch_path, flags, expected):
    _assert_clean_failure(
        hpclaunch("submit", "allreduce", "--profile", "dev-slurm", *flags), hpc_home, expected
    )


def test_time_over_the_limit(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--time", "03:00:00")
    _assert_clean_failure(
        result,
        hpc_home,
        "time 03:00:00 (--time) exceeds the limit of partition 'debug' in profile 'dev-slurm': 02:00:00",
        "hint: ask for --time 02:00:00",
    )


def test_bad_set(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--set", "train.lr")
    _assert_clean_failure(result, hpc_home, "--set 'train.lr': expected KEY=VALUE")


def test_unknown_preset(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--preset", "huge")
    _assert_clean_failure(result, hpc_home, "unknown preset 'huge'; available: slow")


def test_unknown_recipe(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch("submit", "no-such-recipe", "--profile", "dev-slurm")
    _assert_clean_failure(result, hpc_home, "unknown recipe 'no-such-recipe'; available: ", "gpt2")


def test_sbatch_not_found(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch(
        "submit", "allreduce", "--profile", "dev-slurm", "--nodes", "2", "--gpus-per-node", "2"
    )
    _assert_clean_failure(result, hpc_home, "command not found: sbatch", "hint: ")


def test_dry_run_needs_no_sbatch(hpclaunch, hpc_home, no_sbatch_path):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("#!/bin/bash\n# Generated by hpclaunch")
    assert len(list((hpc_home / "runs").iterdir())) == 1
    assert not (hpc_home / "registry").exists()


def test_real_entry_point_prints_no_traceback(hpc_home, tmp_path):
    """The installed `hpclaunch` command (a separate process), not just the click group."""
    env = {**os.environ, "HPCLAUNCH_HOME": str(hpc_home), "HPCLAUNCH_PATH": str(REPO / "tests" / "fixtures")}
    exe = shutil.which("hpclaunch") or None
    argv = [exe] if exe else [sys.executable, "-m", "hpclaunch.cli.main"]
    proc = subprocess.run(
        [*argv, "submit", "allreduce", "--profile", "nope", "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("hpclaunch: error: unknown profile 'nope'; available: ")
    assert "Traceback" not in proc.stderr
    assert not (hpc_home / "runs").exists()


def test_sbatch_refusal_removes_the_run_directory(hpclaunch, hpc_home, no_sbatch_path):
    """sbatch exists but refuses the job: its stderr is reported and the run directory is removed again."""
    sbatch = no_sbatch_path / "sbatch"
    sbatch.write_text(
        "#!/bin/bash\necho 'sbatch: error: Batch job submission failed: Invalid account' >&2\nexit 1\n"
    )
    sbatch.chmod(0o755)
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm")
    _assert_clean_failure(
        result,
        hpc_home,
        "`sbatch --parsable ",
        "failed with exit code 1: sbatch: error: Batch job submission failed: Invalid account",
    )
