"""`hpclaunch profiles init`: a profile from recorded `scontrol show partition|node` output of the dev
cluster (tests/fixtures/slurm-cluster/SOURCES.md), written, then loaded by the profile loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.config.loader import load_profile
from hpclaunch.schedulers.slurm import discover
from hpclaunch.submission.resolve import resolve

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "tests" / "fixtures" / "slurm-cluster" / "dev-22.05.8"


def _dev() -> list[discover.PartitionFacts]:
    return discover.partitions((DEV / "scontrol-show-partition.txt").read_text(),
                               (DEV / "scontrol-show-node.txt").read_text())


def test_the_dev_clusters_partitions_from_scontrol():
    found = {p.name: p for p in _dev()}
    assert set(found) == {"debug", "long"}
    debug, long = found["debug"], found["long"]
    assert debug.default and not long.default
    assert (debug.gpus_per_node, debug.gpu_type, debug.cpus_per_node, debug.memory_gb) == (4, None, 4, 3.9)
    assert (debug.max_time, long.max_time, debug.max_nodes) == ("02:00:00", "1-00:00:00", 4)
    assert debug.nodes == ["node1", "node2", "node3", "node4"]


def test_the_written_profile_loads(tmp_path):
    found = _dev()
    data = discover.profile_data("dev", found, "/etc/profile.d/lmod.sh")
    text = discover.render("dev", data, found, ["gcc/12", "hpclaunch-dev/1.0"])
    path = tmp_path / "dev.yaml"
    path.write_text(text)
    profile = load_profile(str(path))
    assert profile.name == "dev" and profile.scheduler == "slurm" and profile.default_partition == "debug"
    assert profile.partitions["long"].max_time == "1-00:00:00"
    assert profile.partitions["debug"].gpus_per_node == 4 and profile.partitions["debug"].gres == "gpu"
    assert profile.modules.init == "/etc/profile.d/lmod.sh"
    assert "#   hpclaunch-dev/1.0" in text and "run_root" in text


def test_run_root_goes_on_scratch_when_the_site_has_one(tmp_path, monkeypatch):
    for var in discover.SCRATCH_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    assert "run_root" not in discover.profile_data("dev", _dev(), None)
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    data = discover.profile_data("dev", _dev(), None)
    assert data["run_root"] == "$SCRATCH/hpclaunch/runs"
    path = tmp_path / "dev.yaml"
    path.write_text(discover.render("dev", data, _dev(), []))
    from hpclaunch.submission.rundir import run_root

    spec = resolve(str(REPO / "tests" / "fixtures" / "recipes" / "allreduce"), str(path))
    assert run_root(spec) == tmp_path / "hpclaunch" / "runs"


@pytest.mark.parametrize("gres, expected", [
    ("gpu:4", (4, None)),
    ("gpu:a100:8(S:0-1)", (8, "a100")),
    ("gpu:a100:6,gpu:nvidia_a100_1g.10gb:14", (20, "a100+nvidia_a100_1g.10gb")),
    ("(null)", (0, None)),
    ("gpu:h100:8,shard:h100:64", (8, "h100")),
])
def test_gpus_and_their_type_from_gres(gres, expected):
    # Gres spellings of the slurm.conf/gres.conf documentation (not recorded outputs)
    assert discover.parse_gres(gres) == expected


def test_a_cpu_only_partition_and_an_unlimited_time(tmp_path):
    part = ("PartitionName=cpu Default=NO Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED TotalNodes=2\n"
            "PartitionName=admin Hidden=YES MaxNodes=1 MaxTime=01:00:00\n")
    node = ("NodeName=c1 CPUTot=64 Gres=(null) RealMemory=257000 Partitions=cpu,admin\n"
            "NodeName=c2 CPUTot=32 Gres=(null) RealMemory=128000 Partitions=cpu\n")
    found = discover.partitions(part, node)
    assert [p.name for p in found] == ["cpu"]  # hidden partitions are left out
    data = discover.profile_data("cpus", found, None)
    path = tmp_path / "cpus.yaml"
    path.write_text(discover.render("cpus", data, found, []))
    profile = load_profile(str(path))
    cpu = profile.partitions["cpu"]
    assert (profile.accelerator, profile.backend, cpu.gres, cpu.cpus_per_node, cpu.max_nodes) == \
        ("cpu", "gloo", None, 32, 2)
    assert cpu.max_time == "1-00:00:00"  # the profile default; the comment says the cluster has none


def test_refuses_to_overwrite_and_bad_names(hpclaunch, tmp_path):
    existing = tmp_path / "mine.yaml"
    existing.write_text("keep: me\n")
    result = hpclaunch("profiles", "init", "mine", "-o", str(existing))
    assert result.exit_code == 2
    assert "exists already" in result.stderr and "--force" in result.stderr
    assert existing.read_text() == "keep: me\n"
    result = hpclaunch("profiles", "init", "../evil")
    assert result.exit_code == 2 and "not a profile name" in result.stderr
