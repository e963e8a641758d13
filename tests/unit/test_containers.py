"""Containers (docs/containers.md): the profile's `container:` section through the real CLI, the preflight
check of the image file, and the apptainer command a node really runs (under bash, with a recording stub
`apptainer`, as tests/unit/test_quoting.py records `python`: no container runtime installs on this machine).
The rendered scripts themselves are golden copies (tests/unit/test_golden.py, *-apptainer-*, *-pyxis-*)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from hpclaunch.launchers import get_launcher
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOCAL_APPTAINER = FIXTURES / "container_profiles" / "local-apptainer.yaml"


def _profile(tmp_path: Path, container: dict | None, **over) -> Path:
    data = yaml.safe_load(LOCAL_APPTAINER.read_text())
    data["container"] = container
    data.update(over)
    if container is None:
        del data["container"]
    path = tmp_path / "profiles" / "box.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("container, words", [
    ({"runtime": "apptainer"}, ["container", "needs an image"]),
    ({"runtime": "apptainer", "image": "images/pytorch.sif"}, ["container", "'images/pytorch.sif'", "absolute path"]),
    ({"runtime": "apptainer", "image": "/x.sif", "mounts": ["data:/data"]}, ["container", "'data:/data'", "SRC[:DST"]),
    ({"runtime": "apptainer", "image": "/x.sif", "mounts": ["/a,/b"]}, ["container", "'/a,/b'", "no comma"]),
    ({"runtime": "apptainer", "image": "/x.sif", "mounts": ["/a:/b:rx"]}, ["container", "'/a:/b:rx'"]),
    ({"runtime": "apptainer", "image": "/x.sif", "env": {"1BAD": "x"}}, ["container", "'1BAD'", "variable name"]),
    ({"image": "/x.sif"}, ["container", "image given but runtime is none"]),
    ({"runtime": "docker", "image": "/x.sif"}, ["container.runtime", "'docker'", "'apptainer'", "'pyxis'"]),
    ({"runtime": "pyxis", "image": "nvcr.io#nvidia/pytorch:24.01-py3"}, ["pyxis", "scheduler is local"]),
    ({"runtime": "apptainer", "image": "/x.sif", "shell": "bash"}, ["container.shell", "unknown key", "mounts"]),
])
def test_a_bad_container_section_exits_2_naming_file_key_and_value(hpclaunch, hpc_home, tmp_path, container, words):
    path = _profile(tmp_path, container)
    result = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"hpclaunch: error: {path}: "), result.stderr
    for word in words:
        assert word in result.stderr
    assert "Traceback" not in result.output
    assert not (hpc_home / "runs").exists() or not any((hpc_home / "runs").iterdir())


def test_a_missing_image_file_is_refused_before_anything_runs(hpclaunch, hpc_home, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    path = _profile(tmp_path, {"runtime": "apptainer", "image": str(images / "train.sif")})
    # a real submit on the local scheduler: refused before the job starts, no run directory left
    result = hpclaunch("submit", "allreduce", "--profile", str(path))
    assert result.exit_code == 2, result.output
    assert f"the container image {images / 'train.sif'} does not exist" in result.stderr
    assert "container.image" in result.stderr and "apptainer pull" in result.stderr
    assert not (hpc_home / "runs").exists() or not any((hpc_home / "runs").iterdir())
    # a dry run warns and still prints the script
    dry = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "does not exist" in dry.stderr and "apptainer exec" in dry.stdout
    # once the image is there, no warning
    (images / "train.sif").write_bytes(b"SIF")
    dry = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert dry.exit_code == 0 and "container image" not in dry.stderr


@pytest.mark.parametrize("image", ["docker://nvcr.io/nvidia/pytorch:24.01-py3", "/not/mounted/here/x.sif"])
def test_images_this_machine_cannot_see_are_left_to_the_runtime(hpclaunch, tmp_path, image):
    path = _profile(tmp_path, {"runtime": "apptainer", "image": image})
    dry = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert dry.exit_code == 0 and "container image" not in dry.stderr, dry.output


STUB = """#!/bin/bash
# records what `apptainer` was given; refuses what `apptainer exec` would not take
printf '%s\\0' "$@" > "$STUB_OUT/argv"
env | grep '^APPTAINERENV_' | sort > "$STUB_OUT/env"
[ "$1" = exec ] || { echo "stub apptainer: not exec: $1" >&2; exit 2; }
"""


def test_the_node_runs_its_command_inside_apptainer_exec_with_binds_and_env(hpc_home, tmp_path, monkeypatch):
    """The node script as bash on a node runs it: --bind of the run directory, the asset store (its ~/ expanded
    on the node) and the profile's mounts, the container's variables as APPTAINERENV_*, then the image and the
    supervised launch, each one word."""
    path = _profile(tmp_path, {"runtime": "apptainer", "image": "/images/x.sif",
                               "mounts": ["/scratch", "~/data:/data:ro"],
                               "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "ODD": "a b'$(touch PWNED)"}})
    run_dir = tmp_path / "run dir"
    spec = with_recipe_copy(resolve("allreduce", str(path), CliOverrides(layout="1n2g")), run_dir)
    node_script = get_launcher(spec.recipe.launcher).node_script(spec, run_dir)
    stubs, out, home = tmp_path / "stubs", tmp_path / "out", tmp_path / "home"
    for folder in (stubs, out, home):
        folder.mkdir()
    (stubs / "apptainer").write_text(STUB)
    (stubs / "apptainer").chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "STUB_OUT": str(out), "HOME": str(home)}
    subprocess.run(["bash", "-c", node_script], env=env, cwd=tmp_path, check=True)
    argv = (out / "argv").read_bytes().decode().split("\0")[:-1]
    assert argv[:6] == ["exec", f"--bind={run_dir}", f"--bind={home}/.hpclaunch/assets", "--bind=/scratch",
                        f"--bind={home}/data:/data:ro", "/images/x.sif"]
    assert argv[6:9] == ["python", "-m", "hpclaunch.runtime.node.supervise"]
    assert argv[-3:] == [str(run_dir / "recipe" / "allreduce.py"), "--config", str(run_dir / "resolved.yaml")]
    assert (out / "env").read_text().splitlines() == ["APPTAINERENV_NCCL_IB_HCA=mlx5_0,mlx5_1",
                                                      "APPTAINERENV_ODD=a b'$(touch PWNED)"]
    assert not (tmp_path / "PWNED").exists()


def test_a_path_that_cannot_be_mounted_is_refused(hpclaunch, tmp_path):
    path = _profile(tmp_path, {"runtime": "apptainer", "image": "/x.sif"}, assets={"store": "/shared/a,b"})
    result = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert result.exit_code == 2
    assert "assets.store" in result.stderr and "'/shared/a,b' holds a comma" in result.stderr


def test_no_container_changes_nothing(hpclaunch, tmp_path):
    path = _profile(tmp_path, None)
    dry = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert dry.exit_code == 0 and "apptainer" not in dry.stdout


def test_pyxis_runs_through_the_slurm_rest_scheduler_too(hpclaunch, tmp_path):
    """pyxis is srun's plugin: a slurm-rest job script runs srun as a slurm one does, so the profile is accepted
    and the step gets --container-image (only the local scheduler, which has no srun, refuses it)."""
    from hpclaunch.core.paths import bundled_root

    data = yaml.safe_load((bundled_root() / "cluster_profiles" / "dev-slurm-rest.yaml").read_text())
    data["container"] = {"runtime": "pyxis", "image": "nvcr.io#nvidia/pytorch:24.01-py3"}
    path = tmp_path / "profiles" / "rest-pyxis.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data))
    result = hpclaunch("submit", "allreduce", "--profile", str(path), "--layout", "1n2g", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "--container-image=nvcr.io#nvidia/pytorch:24.01-py3" in result.stdout
