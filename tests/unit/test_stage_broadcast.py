"""The packed environment reaches the nodes by a broadcast (docs/fast-start.md#one-read-whatever-the-node-count):
a self-unpacking image (envstage.py), the per-node check, the nodes still pending; and python.stage / assets.stage
auto, resolved at submit from the node count and the container (docs/fast-start.md#the-default-auto)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpclaunch.runtime.node import envstage, nodestage

REPO = Path(__file__).resolve().parents[2]
SQUASHFS = shutil.which("mksquashfs") and shutil.which("unsquashfs")
# the base interpreter and the checkout taken as node-local: not carried (test_envcarry.py carries them)
ENV = {**os.environ, "PYTHONPATH": str(REPO), "HPCLAUNCH_NODE_LOCAL_PREFIXES": f"/usr:{sys.base_prefix}:{REPO}"}


def _envstage(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "hpclaunch.runtime.node.envstage", *args], capture_output=True,
                          text=True, env=ENV)


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> tuple[Path, str]:
    """A real venv packed into a store: (the store's envs/ folder, the key)."""
    root = tmp_path_factory.mktemp("bcast")
    venv = root / "shared" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / "bin" / "mytool").write_text(f"#!{venv}/bin/python\nimport sys\nprint(sys.prefix)\n")
    (venv / "bin" / "mytool").chmod(0o755)
    cache = root / "store" / "envs"
    proc = _envstage(venv / "bin" / "python", "pack", "--cache", str(cache))
    assert proc.returncode == 0, proc.stderr
    return cache, proc.stdout.strip()


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_a_node_unpacks_the_copy_of_the_image_it_received(packed, tmp_path):
    """sbcast writes each node's own copy of the image on its disk; the node unpacks it, reading nothing from the
    store (the record travels in the image's header), or the copy runs itself."""
    cache, key = packed
    image = cache / f"{key}.sqfs"
    assert os.access(image, os.X_OK) and image.read_bytes().startswith(b"#!/bin/sh\n")
    assert envstage.image_record(image)["key"] == key  # the record travels in the image's header
    received = tmp_path / "scratch" / ".bcast" / f"{key}.12.sqfs"  # the job script's name for it
    received.parent.mkdir(parents=True)
    shutil.copy2(image, received)
    scratch = tmp_path / "scratch"
    run = subprocess.run([str(received), sys.executable, "--scratch", str(scratch), "--node-id-env", "NODE_ID"],
                         capture_output=True, text=True, env={**ENV, "NODE_ID": "node7"})
    assert run.returncode == 0, run.stderr
    line = json.loads(run.stdout)
    assert (line["result"], line["via"], line["env"], line["id"]) == ("copied", "broadcast", key, "node7")
    assert received.exists()  # the job script removes it on every node once every node unpacked it
    copy = scratch / nodestage.node_name() / "envs" / key
    out = subprocess.run([str(copy / "bin" / "mytool")], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert Path(out.stdout.strip()) == copy  # relocated as a copy from the store is

    check = _envstage(Path(sys.executable), "node", "--check", "--key", key, "--scratch", str(scratch))
    assert json.loads(check.stdout)["result"] == "warm"
    (copy / "bin" / "mytool").write_text("corrupt")
    check = _envstage(Path(sys.executable), "node", "--check", "--key", key, "--scratch", str(scratch))
    assert json.loads(check.stdout)["result"] == "missing"


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_a_broadcast_copy_that_fails_to_unpack_is_a_warning(packed, tmp_path):
    cache, key = packed
    received = tmp_path / f"{key}.12.sqfs"
    received.write_bytes((cache / f"{key}.sqfs").read_bytes()[:envstage.HEADER + 100])  # cut short on the way
    received.chmod(0o755)
    run = subprocess.run([str(received), sys.executable, "--scratch", str(tmp_path / "scratch")],
                         capture_output=True, text=True, env=ENV)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"hpclaunch: warning: node {nodestage.node_name()}: unsquashfs")
    assert "the node copies it from the asset store instead" in run.stderr


def test_an_image_packed_before_it_unpacked_itself_is_packed_again(packed, tmp_path):
    cache, key = packed
    old = tmp_path / "envs"
    shutil.copytree(cache, old)
    record = json.loads((old / f"{key}.json").read_text())
    del record["offset"]
    (old / f"{key}.json").write_text(json.dumps(record))
    again = envstage.pack(Path(record["prefix"]), old)
    assert again["result"] == "packed" and again["offset"] == envstage.HEADER


def test_the_nodes_still_pending_are_those_no_line_says_hold_it(tmp_path):
    results = tmp_path / "staged"
    results.write_text('{"node": "n1", "id": "node1", "result": "warm"}\n'
                       '{"node": "n2", "id": "node2", "result": "missing"}\n'
                       "srun: error: something else\n"
                       '{"node": "n3", "id": "node3", "result": "copied", "via": "broadcast"}\n')
    assert envstage.pending(results, ["node1", "node2", "node3", "node4"]) == ["node2", "node4"]
    assert envstage.pending(tmp_path / "none", ["node1"]) == ["node1"]  # no results at all: every node
    proc = _envstage(Path(sys.executable), "pending", "--results", str(results), "--nodes", "node1,node2,node4")
    assert proc.stdout == "node2,node4\n"


def _dry(hpclaunch, *args: str) -> str:
    result = hpclaunch("submit", "allreduce", "--dry-run", *args)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def auto_profile(tmp_path) -> Path:
    """dev-slurm with the defaults (python.stage and assets.stage auto), as a site's profile has them."""
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    del data["python"]["stage"], data["assets"]["stage"]
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_auto_stages_a_job_of_several_nodes_by_broadcast_with_the_shared_fallback(hpclaunch, hpc_home,
                                                                                   auto_profile):
    out = _dry(hpclaunch, "--profile", str(auto_profile), "--nodes", "2")
    pack = "envstage pack --cache \"${HOME}/.hpclaunch/assets/envs\" --print-path --fallback)"
    assert pack in out  # auto never ends a job
    # the key is known before the health check, which runs with the node's copy or the OS's python where it can
    assert out.index(pack) < out.index("hpclaunch.runtime.node.health check") < out.index("sbcast")
    assert '"$hpclaunch_copy_py" -c' in out and 'hpclaunch_run=(/usr/bin/python3 -I -B' in out
    assert 'sbcast --force "${HOME}/.hpclaunch/assets/envs"/"$HPCLAUNCH_ENV_KEY".sqfs' in out
    assert "envstage node --check" in out and '--image "${hpclaunch_copy}"' in out
    assert "export HPCLAUNCH_NODE_ASSETS=fallback; " in out
    assert "hpclaunch_stamp env_fallback" in out
    one = _dry(hpclaunch, "--profile", str(auto_profile), "--nodes", "1")
    assert "envstage" not in one and "HPCLAUNCH_NODE_ASSETS" not in one  # one node: nothing to spare
    shared = _dry(hpclaunch, "--profile", str(auto_profile), "--nodes", "2", "--set", "python.stage=shared")
    assert "envstage" not in shared and "HPCLAUNCH_NODE_ASSETS=fallback" in shared
    local = _dry(hpclaunch, "--profile", "local", "--set", "python.stage=auto")
    assert "envstage" not in local  # the local scheduler's one machine


def test_a_site_turns_the_broadcast_off_and_each_node_copies_from_the_store(hpclaunch, hpc_home, auto_profile):
    data = yaml.safe_load(auto_profile.read_text())
    data["node_broadcast"] = False
    auto_profile.write_text(yaml.safe_dump(data))
    out = _dry(hpclaunch, "--profile", str(auto_profile), "--nodes", "2")
    assert "sbcast" not in out and "envstage node --check" not in out
    assert "envstage node --cache \"${HOME}/.hpclaunch/assets/envs\"" in out


def test_auto_stays_shared_in_a_container(hpclaunch, hpc_home):
    out = _dry(hpclaunch, "--profile", "dev-slurm-container", "--nodes", "2")
    assert "envstage" not in out and "HPCLAUNCH_NODE_ASSETS" not in out


def test_an_asset_copy_that_fails_under_auto_reads_the_store_and_says_so(tmp_path, monkeypatch, capsys):
    from hpclaunch.errors import AssetError
    from hpclaunch.runtime.train import nodeassets

    store = tmp_path / "store"
    folder = store / "generated" / "models" / "k1"
    folder.mkdir(parents=True)
    (folder / "w.bin").write_bytes(b"x" * 100)
    blocked = tmp_path / "scratch"
    blocked.write_text("a file where the node's scratch folder should be")
    monkeypatch.setenv("HPCLAUNCH_NODE_SCRATCH", str(blocked))
    monkeypatch.setenv("HPCLAUNCH_NODE_ASSETS", "1")
    with pytest.raises(AssetError, match="copying .* to node-local scratch failed"):
        nodeassets.local_copy(folder, store)
    monkeypatch.setenv("HPCLAUNCH_NODE_ASSETS", "fallback")
    assert nodeassets.local_copy(folder, store) == folder
    err = capsys.readouterr().err
    assert err.startswith("hpclaunch: warning: copying ") and f"reads {folder} from the store" in err
