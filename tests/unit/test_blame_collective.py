"""A collective timeout and the blame for a retry (hpclaunch.runtime.node.blame): the timeout alone is no
node fault; a node none of whose ranks reported it, while every rank elsewhere did, is the one to exclude."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.runtime.node import blame
from hpclaunch.state.runfiles import RunFiles

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
# a real torch 2.x watchdog line (hiyouga/LlamaFactory#6269, tests/fixtures/failures/SOURCES.md)
WATCHDOG = (FIXTURES / "nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log").read_text().splitlines()[0]
HOSTS = {0: "node1", 1: "node1", 2: "node2", 3: "node2"}


def _run(tmp_path: Path, reported: list[int]) -> RunFiles:
    """Four ranks on two nodes; the `reported` ranks' logs hold the watchdog timeout, the others only trained."""
    run = RunFiles(tmp_path)
    run.logs.mkdir()
    for rank, host in HOSTS.items():
        path = run.progress_file(rank, 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rank": rank, "step": 7, "phase": "collective", "t": 1.0, "host": host}))
        text = WATCHDOG.replace("[rank0]", f"[rank{rank}]").replace("[Rank 0]", f"[Rank {rank}]")
        tail = text + "\n" if rank in reported else ""
        (run.logs / f"rank-{rank}.restart-0.log").write_text("step 7 loss 2.0\n" + tail)
    return run


def test_the_node_none_of_whose_ranks_reported_the_timeout_is_blamed(tmp_path: Path) -> None:
    found = blame.blame(_run(tmp_path, [0, 1]), 0, 1)
    assert found is not None and found.nodes == ("node2",)
    assert "rank(s) 2, 3 on node2 did not report it" in found.reason and "_REDUCE_SCATTER_BASE" in found.reason


@pytest.mark.parametrize("reported", [[0, 1, 2, 3], [0, 2], [0, 1, 2]],
                         ids=["every rank reported it", "suspects on both nodes", "a rank of the node reported it"])
def test_a_timeout_without_one_suspect_node_blames_none(tmp_path: Path, reported: list[int]) -> None:
    assert blame.blame(_run(tmp_path, reported), 0, 1) is None
