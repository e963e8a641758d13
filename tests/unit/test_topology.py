"""Placement on the network (hpclaunch/submission/placement.py, docs/profiles.md#network-topology): Slurm's
`scontrol show topology` read as leaf switches or blocks (recorded outputs in tests/fixtures/slurm/), the choice from
the job's tensor-parallel groups, the refusal of a group no switch or block holds, what the dry run says and what
the job script asks, and the overrides (profile, --set)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.config.topology import parse_placement, placement_text
from hpclaunch.errors import ConfigError, LimitError
from hpclaunch.schedulers.base import Topology
from hpclaunch.schedulers.slurm.topology import expand_hostlist, parse_topology, partition_fields
from hpclaunch.submission.placement import choose, group_nodes
from hpclaunch.submission.resolve import CliOverrides, resolve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "slurm_topology"  # SOURCES.md there says where each file comes from
TREE = str(FIXTURES / "topology_profiles" / "a800-tree.yaml")
BLOCK = str(FIXTURES / "topology_profiles" / "a800-block.yaml")


def _spec(profile: str, layout: str, *sets: str, preset: str | None = "tp", recipe: str = "mixtral"):
    return resolve(recipe, profile, CliOverrides(preset=preset, layout=layout, sets=sets))


def _never():
    raise AssertionError("the topology was read though the choice did not need it")


# --- reading Slurm's answer --------------------------------------------------------------------------------------

def test_hostlists_expand_as_slurm_writes_them():
    assert expand_hostlist("node[1-3,7]") == ["node1", "node2", "node3", "node7"]
    assert expand_hostlist("gpu[08-10]x,login") == ["gpu08x", "gpu09x", "gpu10x", "login"]
    assert expand_hostlist("sid1") == ["sid1"]


def test_a_tree_is_its_leaf_switches_with_their_node_counts():
    text = (RECORDED / "dev-26.05.5-topology-tree.txt").read_text()
    assert text.startswith("SwitchName=root Level=1 LinkSpeed=0 Nodes=sid[1-4] Switches=leaf[1-2]\n")
    assert parse_topology(text) == Topology("tree", (2, 2), "scontrol show topology")  # the root is no leaf
    assert parse_topology(text, {"sid1", "sid2", "sid3"}) == Topology("tree", (2, 1), "scontrol show topology")


def test_a_tree_of_22_05_reads_the_same():
    """22.05 lists the leaves first and says LinkSpeed=1 (26.05: the root first, LinkSpeed=0)."""
    text = (RECORDED / "dev-22.05.8-topology-tree.txt").read_text()
    assert parse_topology(text) == Topology("tree", (2, 2), "scontrol show topology")


def test_blocks_are_read_with_their_node_counts():
    text = (RECORDED / "dev-26.05.5-topology-block.txt").read_text()
    assert parse_topology(text) == Topology("block", (2, 2), "scontrol show topology")
    assert parse_topology(text, {"sid9"}) is None  # none of the partition's nodes: nothing to place by


def test_from_25_05_a_partition_names_its_own_topology():
    """Slurm 26.05 with topology.yaml: a partition that names a topology says Topology=NAME (`scontrol show topology
    NAME` lists it); one on the cluster's default (flat here) says none, and `scontrol show topology` prints
    nothing for a flat default."""
    for name, recorded in (("tree", "dev-26.05.5-partition-tree.txt"), ("block", "dev-26.05.5-partition-block.txt")):
        nodes, topology = partition_fields((RECORDED / recorded).read_text())
        assert nodes == {"sid1", "sid2", "sid3", "sid4"} and topology == name
    assert partition_fields((RECORDED / "dev-26.05.5-partition-debug.txt").read_text())[1] is None
    assert (RECORDED / "dev-26.05.5-topology-default.stdout").read_text() == ""
    assert (RECORDED / "dev-26.05.5-topology-default.stderr").read_text() == ""


def test_no_topology_plugin_is_no_topology():
    """Slurm 22.05 without a topology plugin: nothing on stdout, "No topology information available" on stderr,
    exit 0."""
    assert (RECORDED / "dev-22.05.8-topology-none.stdout").read_text() == ""
    assert "No topology information" in (RECORDED / "dev-22.05.8-topology-none.stderr").read_text()
    assert parse_topology((RECORDED / "dev-22.05.8-topology-none.stdout").read_text()) is None


def test_a_partition_says_its_nodes_and_before_25_05_no_topology_of_its_own():
    nodes, name = partition_fields((RECORDED / "dev-22.05.8-partition-debug.txt").read_text())
    assert nodes == {"node1", "node2", "node3", "node4"} and name is None


# --- the choice ----------------------------------------------------------------------------------------------------

def test_groups_within_a_node_need_no_topology_and_ask_nothing():
    assert group_nodes(4, 8) == 1 and group_nodes(8, 4) == 2 and group_nodes(3, 4) == 3
    spec = _spec("guangzhou-a800", "2n2g")  # tensor-parallel 2 on 2 devices per node: within each node
    assert choose(spec, _never) is None  # a profile without a topology: nothing read, nothing said
    placed = choose(_spec(TREE, "2n2g"), _never)
    assert placed is not None and placed.switches is None and placed.segment is None
    assert "sit within a node" in placed.text and "nothing asked" in placed.text


def test_groups_across_nodes_on_a_tree_ask_for_one_leaf_switch_with_a_bounded_wait():
    placed = choose(_spec(TREE, "4n1g"), _never)  # groups of 2 on 1 device per node: 2 nodes; 4 nodes fit 4
    assert (placed.switches, placed.max_wait, placed.segment) == (1, "10:00", None)
    assert "span 2 nodes" in placed.text and "switches=1@10:00" in placed.text


def test_a_job_larger_than_a_leaf_switch_asks_for_the_fewest_and_says_groups_may_straddle():
    placed = choose(_spec(TREE, "8n1g"), _never)
    assert placed.switches == 2 and "cannot keep each group under one switch" in placed.text


def test_groups_across_nodes_on_blocks_ask_one_block_per_group():
    placed = choose(_spec(BLOCK, "8n1g"), _never)
    assert (placed.segment, placed.switches) == (2, None) and "segment=2" in placed.text


def test_the_topology_is_read_from_the_scheduler_when_the_profile_gives_none():
    asked = []

    def read():
        asked.append(1)
        return Topology("block", (18, 18), "scontrol show topology")

    placed = choose(_spec("guangzhou-a800", "4n1g"), read)
    assert placed.segment == 2 and "scontrol show topology" in placed.text and asked == [1]
    placed = choose(_spec("guangzhou-a800", "4n1g"), lambda: None)
    assert placed.segment is None and placed.switches is None and "reports no network topology" in placed.text


def test_a_group_larger_than_a_switch_is_refused_with_the_sizes_and_the_fix():
    with pytest.raises(LimitError) as caught:
        choose(_spec("guangzhou-a800", "8n1g"), lambda: Topology("tree", (1, 1), "scontrol show topology"))
    err = caught.value
    assert err.exit_code == 2
    assert "span 2 nodes" in err.message and "at most 1 node (" in err.message
    assert "parallel.model_parallel" in err.hint and "topology.placement=none" in err.hint


# --- overrides -----------------------------------------------------------------------------------------------------

def test_set_placement_none_overrides_the_profile():
    placed = choose(_spec(TREE, "4n1g", "topology.placement=none"), _never)
    assert placed.switches is None and placed.segment is None
    assert "nothing asked (topology.placement of the recipe or --set: none)" in placed.text


def test_a_given_placement_is_asked_as_given():
    placed = choose(_spec("guangzhou-a800", "4n2g", "topology.placement=switches=2@1:00:00"), _never)
    assert (placed.switches, placed.max_wait) == (2, "1:00:00")
    with pytest.raises(ConfigError, match="not a multiple of 3"):
        choose(_spec("guangzhou-a800", "4n2g", "topology.placement=segment=3"), _never)


def test_placements_are_checked_where_they_are_read(write_profile, hpclaunch):
    assert parse_placement("switches=1@10:00") == ("switches", 1, "10:00")
    assert parse_placement("segment=2") == ("segment", 2, None) and placement_text(" none ") == "none"
    with pytest.raises(ValueError, match="not a placement"):
        placement_text("switches=0")
    result = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--set", "topology.placement=racks",
                       "--dry-run")
    assert result.exit_code == 2 and "topology.placement" in result.output and "switches=N@TIME" in result.output
    result = hpclaunch("submit", "allreduce", "--profile", TREE.replace("tree", "block"), "--set",
                       "topology.placement=switches=1@1:2:3:4", "--dry-run")
    assert result.exit_code == 2 and "not a Slurm time" in result.output


def test_a_tree_without_its_size_is_refused(write_profile, hpclaunch):
    path = write_profile(topology={"kind": "tree"})
    result = hpclaunch("profiles", "show", str(path))
    assert result.exit_code == 2 and "topology.kind tree needs topology.size" in result.output


# --- what the user sees ----------------------------------------------------------------------------------------------

def test_the_dry_run_says_the_choice_and_the_script_asks_it(hpclaunch):
    result = hpclaunch("submit", "mixtral", "--profile", TREE, "--preset", "tp", "--layout", "4n1g", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "hpclaunch: topology: tensor-parallel groups of 2 devices span 2 nodes; the job's 4 nodes fit one leaf " \
           "switch of 4" in result.output
    assert "#SBATCH --switches=1@10:00\n" in result.output
    result = hpclaunch("submit", "mixtral", "--profile", TREE, "--preset", "tp", "--layout", "4n1g", "--set",
                       "topology.placement=none", "--dry-run")
    assert "--switches" not in result.output and "hpclaunch: topology: nothing asked" in result.output


def test_a_job_without_groups_across_nodes_says_nothing_new(hpclaunch):
    result = hpclaunch("submit", "allreduce", "--profile", "guangzhou-a800", "--layout", "2n8g", "--dry-run")
    assert result.exit_code == 0 and "topology" not in result.output and "--switches" not in result.output


def test_every_recorded_answer_is_used_and_sourced():
    this = Path(__file__).read_text()
    sources = (RECORDED / "SOURCES.md").read_text()
    for path in RECORDED.iterdir():
        if path.suffix != ".md":
            assert f'"{path.name}"' in this, f"{path.name} is used by no test"
            assert f"`{path.name}`" in sources, f"{path.name}: SOURCES.md does not say where it is from"


def test_slurmrestd_cannot_take_a_placement_and_says_how_to_go_without():
    from hpclaunch.schedulers.slurm_rest.jobdesc import check_options

    with pytest.raises(ConfigError) as caught:
        check_options(["switches"])
    assert "--set topology.placement=none" in caught.value.hint
