"""Charliecloud (docs/containers.md#charliecloud): the profile's checks through the real CLI, and the run directory's
container-run.sh as a node runs it: a real SquashFS image (mksquashfs) unpacked by the real unsquashfs once per
node into the stage folder, the mount points made, the stamp of the timeline; `ch-run` itself is a recording stub
that runs the command on the host (tests/integration/test_charliecloud_slurm.py runs the real one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpclaunch.launchers import get_launcher
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission.render import render
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy

LOCAL_APPTAINER = Path(__file__).resolve().parents[1] / "fixtures" / "container_profiles" / "local-apptainer.yaml"


def _profile(tmp_path: Path, container: dict) -> Path:
    data = yaml.safe_load(LOCAL_APPTAINER.read_text())
    data["container"] = container
    path = tmp_path / "profiles" / "ch.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("container, words", [
    ({"runtime": "charliecloud"}, ["container", "needs an image", "/shared/images/train.sqfs"]),
    ({"runtime": "charliecloud", "image": "img.sqfs"}, ["container", "'img.sqfs'", "absolute path"]),
    ({"runtime": "apptainer", "image": "/x.sif", "stage_dir": "/local"}, ["stage_dir", "only runtime charliecloud"]),
    ({"runtime": "charliecloud", "image": "/x.sqfs", "stage_dir": "local"}, ["stage_dir", "'local'", "absolute"]),
    ({"runtime": "charliecloud", "image": "/x.sqfs", "mounts": ["/data:/data:ro"]}, ["container.mounts", ":ro"]),
])
def test_a_bad_charliecloud_section_exits_2_naming_the_key(hpclaunch, hpc_home, tmp_path, container, words):
    result = hpclaunch("submit", "allreduce", "--profile", str(_profile(tmp_path, container)), "--dry-run")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.stderr


# ch-run as a recording stub: its arguments one per line, then the command after `--` run on the host
CH_RUN = """#!/bin/bash
printf '%s\\n' "$@" >> "$STUB_OUT/ch-run.argv"
while [ "$1" != -- ]; do shift; done
shift
exec "$@"
"""


def _system() -> str:
    """This machine's PRETTY_NAME: the stub ch-run runs the command here, not in an image."""
    text = Path("/etc/os-release").read_text()
    return next(line.split("=", 1)[1].strip().strip('"') for line in text.splitlines()
                if line.startswith("PRETTY_NAME="))


@pytest.fixture
def node(hpc_home, tmp_path):
    """(run a node's launch, the run directory, the image, the stage folder) for a local charliecloud profile."""
    image = tmp_path / "images" / "train.sqfs"
    tree = tmp_path / "tree"
    (tree / "ch").mkdir(parents=True)
    (tree / "ch" / "environment").write_text("PATH=/opt/venv/bin:/usr/bin:/bin\n")
    image.parent.mkdir()
    subprocess.run(["mksquashfs", str(tree), str(image), "-quiet", "-no-progress"], check=True)
    stage = tmp_path / "local scratch"
    path = _profile(tmp_path, {"runtime": "charliecloud", "image": str(image), "stage_dir": str(stage)})
    run_dir = tmp_path / "run"
    spec = with_recipe_copy(resolve("allreduce", str(path), CliOverrides(layout="1n2g")), run_dir)
    run_dir.mkdir()
    for name, text in render(spec, run_dir).files.items():
        (run_dir / name).write_text(text)
    script = get_launcher(spec.recipe.launcher).node_script(spec, run_dir).replace(
        "exec bash", "bash")  # the launch itself is the stub's: keep the shell to read what it did
    stubs, out = tmp_path / "stubs", tmp_path / "out"
    stubs.mkdir()
    out.mkdir()
    (stubs / "ch-run").write_text(CH_RUN)
    (stubs / "ch-run").chmod(0o755)
    # the node stager runs on the host's python (the real one); what runs inside the container is recorded
    (stubs / "python").write_text(f"#!/bin/sh\ncase \"$*\" in \"-m hpclaunch.runtime.node.nodestage \"*) "
                                  f"exec {sys.executable} \"$@\";; esac\necho \"python $*\" > \"$STUB_OUT/ran\"\n")
    (stubs / "python").chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "STUB_OUT": str(out), "HOME": str(tmp_path / "home"),
           "HPCLAUNCH_NODE_RANK": "0", "HPCLAUNCH_RESTART": "0", "HPCLAUNCH_JOB_ID": "7"}

    def launch(**over: str) -> subprocess.CompletedProcess:
        return subprocess.run(["/bin/bash", "-c", script], env={**env, **over}, cwd=tmp_path, capture_output=True,
                              text=True)

    return launch, run_dir, image, stage, out


def test_the_image_is_unpacked_once_per_node_and_ch_run_gets_the_mounts(node):
    launch, run_dir, image, stage, out = node
    first = launch()
    assert first.returncode == 0, first.stderr
    (unpacked,) = stage.glob("[!.]*")
    assert unpacked.name.startswith("train-") and "unpacked on" in first.stderr
    assert (unpacked / "ch" / "environment").is_file()
    argv = (out / "ch-run.argv").read_text().splitlines()
    home = run_dir.parent / "home"
    assert argv[:5] == ["--set-env", f"--bind={run_dir}", f"--bind={home}/.hpclaunch/assets", str(unpacked), "--"]
    assert (unpacked / str(run_dir).lstrip("/")).is_dir()  # the mount points, made in the unpacked copy
    assert (unpacked / str(home).lstrip("/") / ".hpclaunch" / "assets").is_dir()
    assert (out / "ran").read_text().startswith("python -m hpclaunch.runtime.node.supervise ")
    assert f"hpclaunch: node 0 in the container: {_system()}, python is {out.parent}/stubs/python" in first.stdout
    (stamp,) = [json.loads(line) for line in RunFiles(run_dir).timeline.read_text().splitlines()]
    assert stamp["phase"] == "container_started" and stamp["job"] == "7" and stamp["restart"] == 0

    second = launch()
    assert second.returncode == 0, second.stderr
    assert "already on" in second.stderr and list(stage.glob("[!.]*")) == [unpacked]


def test_a_corrupt_image_ends_the_launch_naming_node_and_image_and_leaves_nothing(node):
    launch, run_dir, image, stage, out = node
    image.write_bytes(b"not a squashfs image\n" * 100)
    result = launch()
    assert result.returncode == 1
    assert f"cannot unpack the image {image}" in result.stderr and os.uname().nodename in result.stderr
    assert list(stage.glob("[!.]*")) == [] and not (out / "ch-run.argv").exists()


def test_a_rebuilt_image_gets_a_new_folder(node):
    launch, run_dir, image, stage, out = node
    assert launch().returncode == 0
    os.utime(image, (1, 1))
    assert launch().returncode == 0
    assert len(list(stage.glob("[!.]*"))) == 2


def test_a_node_without_ch_run_says_so_and_what_to_install(node, tmp_path):
    launch, run_dir, image, stage, out = node
    bare = tmp_path / "bare"  # only what the node script needs before its check: no ch-run, no unsquashfs
    bare.mkdir()
    for tool in ("bash", "hostname"):
        (bare / tool).symlink_to(shutil.which(tool))
    result = launch(PATH=str(bare))
    assert result.returncode == 127
    assert "hpclaunch: error: ch-run is not on " in result.stderr and "charliecloud-runtime" in result.stderr
    assert not stage.exists()
