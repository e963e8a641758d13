"""The health check's links (hpclaunch/runtime/node/tcplinks.py on CPU, hpclaunch/runtime/train/linkcheck.py through
the collective library on devices): every node meets ceil(log2 N) partners in as many rounds, and a node that never
came fails itself, not the nodes that waited for it. (Two torch processes: tests/unit/test_health.py.)"""

from __future__ import annotations

import socket
import threading

import pytest

from hpclaunch.runtime.node.health import check_allreduce
from hpclaunch.runtime.node.tcplinks import partners


@pytest.mark.parametrize("nodes", [2, 3, 4, 5, 7, 8, 64, 100, 1024, 1025])
def test_every_node_meets_its_partners_in_log2_rounds_and_the_pairs_join_every_node(nodes):
    rounds = (nodes - 1).bit_length()
    seen = {0}
    for node in range(nodes):
        mine = partners(node, nodes)
        assert 1 <= len(mine) <= rounds
        for k, partner in mine:  # symmetric, in the same round: both ends meet there
            assert 0 <= partner < nodes and partner != node
            assert (k, node) in partners(partner, nodes)
    frontier = [0]
    while frontier:  # the pairs connect every node: a bad one cannot hide in a part nobody meets
        node = frontier.pop()
        for _, partner in partners(node, nodes):
            if partner not in seen:
                seen.add(partner)
                frontier.append(partner)
    assert seen == set(range(nodes))
    assert max(len(partners(node, nodes)) for node in range(nodes)) == rounds  # 1,024 nodes: 10 rounds


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _check_nodes(env: dict, ranks: range, timeout: float) -> dict[int, dict]:
    """Each of `ranks` runs its health check's links at once, a thread each, as the nodes of one job do."""
    found: dict[int, dict] = {}

    def node(rank: int) -> None:
        found[rank] = check_allreduce({**env, "HPCLAUNCH_NODE_RANK": str(rank)}, mib=1, timeout=timeout, min_gbps=0.0,
                                      nodes=4)

    threads = [threading.Thread(target=node, args=(rank,)) for rank in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return found


def test_a_node_that_never_came_fails_alone_and_its_partners_name_it():
    """4 nodes over TCP (each node its own port on this host, as the dev cluster's nodes have their own address),
    node 3 never starts: nodes 1 and 2 (its partners in rounds 1 and 0) each lose one of two links and pass,
    naming node 3; node 0 never meets it. The verdict then fails node 3 alone (no result from it)."""
    hosts = [f"127.0.0.1:{port}" for port in _free_ports(4)]
    env = {"HPCLAUNCH_ALLOCATION": ",".join(hosts), "HPCLAUNCH_ACCELERATOR": "cpu", "HPCLAUNCH_JOB_ID": "links"}
    found = _check_nodes(env, range(3), timeout=5.0)
    assert all(found[r]["ok"] for r in range(3)), found
    assert found[0]["backend"] == "tcp" and found[0]["failed_partners"] == [] and len(found[0]["pairs"]) == 2
    for rank in (1, 2):
        assert found[rank]["failed_partners"] == [3], found[rank]
        assert "no answer from node(s) 3" in found[rank]["detail"]
        assert found[rank]["busbw_gbps"] > 0
    alone = check_allreduce({**env, "HPCLAUNCH_NODE_RANK": "3", "HPCLAUNCH_ALLOCATION": ",".join(hosts[:2] + [
        hosts[2], hosts[3]])}, mib=1, timeout=1.0, min_gbps=0.0, nodes=4)
    assert alone["ok"] is False and "no answer from node(s) 2, 1" in alone["detail"], alone  # nobody came for it


def test_nodes_that_share_one_address_each_listen_on_their_own_port():
    """The second dev cluster's nodes (Slurm 26.05) share the host's network: 4 nodes all named 127.0.0.1 (no port
    given) once collided on the health check's port ('Address already in use' on all but one node). Each now
    listens on the port + its index, and every link is measured."""
    env = {"HPCLAUNCH_ALLOCATION": ",".join(["127.0.0.1"] * 4), "HPCLAUNCH_ACCELERATOR": "cpu",
           "HPCLAUNCH_JOB_ID": "shared-address"}
    found = _check_nodes(env, range(4), timeout=10.0)
    assert all(found[r]["ok"] and found[r]["failed_partners"] == [] for r in range(4)), found
    assert all(len(found[r]["pairs"]) == 2 for r in range(4))
