"""`stage-assets --slurm-partition P`: staging runs inside a real Slurm job (through submitit) on a
node of the dev cluster, downloading from a hub server that the node reaches over the cluster network,
into the same store; the login side waits and gets the results back."""

from __future__ import annotations

import json
import subprocess

import pytest

from hpclaunch.assets.store import MANIFEST, asset_path
from tests.fixtures.hubserver.fixtures import *  # noqa: F403
from tests.fixtures.hubserver.server import HubServer

BRIDGE = "10.77.0.254"  # the dev cluster's host address, reachable from every node's namespace


def _bridge_up() -> bool:
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
    return f" {BRIDGE}/" in out


@pytest.mark.slurm
@pytest.mark.skipif(not _bridge_up(), reason=f"the dev cluster bridge {BRIDGE} is not up")
def test_staging_runs_as_a_slurm_job_on_a_transfer_partition(asset_env, hub_root):
    with HubServer(hub_root, host=BRIDGE) as hub:
        profile = asset_env.profile(mirror=hub.url)
        res = asset_env.run("stage-assets", "--model", "tiny-org/tiny-model",
                            "--dataset", "tiny-org/tiny-text:small-v1",
                            "--profile", profile, "--slurm-partition", "debug", "--json")
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["host"].startswith("node"), out  # the downloads ran on a cluster node, not here
        assert out["errors"] == []
        assert {a["kind"] for a in out["assets"]} == {"model", "dataset"}
        assert any(path.startswith("/api/models/tiny-org/tiny-model") for _, path in hub.requests)
    folder = asset_path(asset_env.store, "model", "tiny-org/tiny-model")
    assert (folder / MANIFEST).is_file() and (folder / "config.json").is_file()
    verify = asset_env.run("assets", "verify", "--profile", profile)
    assert verify.exit_code == 0, verify.output
