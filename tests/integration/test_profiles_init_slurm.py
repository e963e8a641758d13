"""`hpclaunch profiles init` on the dev Slurm cluster: the profile written from scontrol loads, and its
partitions and limits are the ones `sinfo` shows."""

from __future__ import annotations

import subprocess

import pytest

from hpclaunch.config.loader import load_profile
from tests.integration.test_slurm_launch import needs_slurm

pytestmark = [pytest.mark.slurm, needs_slurm]


def _sinfo() -> dict[str, tuple[str, int]]:
    """partition -> (time limit, nodes) as sinfo shows them."""
    out = subprocess.run(["sinfo", "--noheader", "--format=%R|%l|%D"], capture_output=True, text=True,
                         check=True).stdout
    rows = [line.split("|") for line in out.split()]
    return {r[0]: (r[1], int(r[2])) for r in rows}


def test_profiles_init_writes_a_profile_that_loads(hpclaunch, tmp_path):
    out = tmp_path / "devinit.yaml"
    result = hpclaunch("profiles", "init", "devinit", "-o", str(out))
    assert result.exit_code == 0, result.output
    profile = load_profile(str(out))
    sinfo = _sinfo()
    assert set(profile.partitions) == set(sinfo)
    for name, part in profile.partitions.items():
        limit, nodes = sinfo[name]
        assert part.max_time.lstrip("0:") == limit.lstrip("0:")  # sinfo writes 2:00:00, the profile 02:00:00
        assert part.max_nodes == nodes
        assert part.gpus_per_node == 4 and part.gres == "gpu"  # the dev cluster's Gres=gpu:4
    assert profile.scheduler == "slurm" and profile.modules.init
    assert "hpclaunch-dev/1.0" in out.read_text()  # module -t avail through Lmod

    again = hpclaunch("profiles", "init", "devinit", "-o", str(out), "--partition", "debug")
    assert again.exit_code == 2 and "--force" in again.stderr
    forced = hpclaunch("profiles", "init", "devinit", "-o", str(out), "--partition", "debug", "--force")
    assert forced.exit_code == 0, forced.output
    assert set(load_profile(str(out)).partitions) == {"debug"}
    bad = hpclaunch("profiles", "init", "devinit", "-o", str(tmp_path / "x.yaml"), "--partition", "nope")
    assert bad.exit_code == 2 and "no partition 'nope'" in bad.stderr and not (tmp_path / "x.yaml").exists()
