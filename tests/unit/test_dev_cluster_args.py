"""`scripts/dev-cluster.sh up --nodes N` checks its command line before it touches anything: a node count that is
not a whole number from 1 to 253 (one address each in the nodes' /24), a missing one or an unknown option is one
line on stderr and exit 2, for any user (no root needed to be told), and nothing is started or stopped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "dev-cluster.sh"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("args, says", [
    (("up", "--nodes", "0"), "up --nodes: '0' is not a node count: give a whole number from 1 to 253"),
    (("up", "--nodes", "254"), "'254' is not a node count"),
    (("up", "--nodes", "sixty"), "'sixty' is not a node count"),
    (("up", "--nodes=-4"), "'-4' is not a node count"),
    (("up", "--nodes", "6 4"), "'6 4' is not a node count"),
    (("up", "--nodes"), "up --nodes: give a node count, e.g. --nodes 64"),
    (("restart", "--nodes", "1.5"), "'1.5' is not a node count"),
    (("up", "--node", "64"), "up: unknown option --node (options: --no-accounting, --accounting, --nodes N)"),
])
def test_a_bad_node_count_is_one_line_and_exit_2(args, says):
    proc = _run(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("dev-cluster: error: ") and says in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_the_usage_names_the_node_count():
    out = _run("--help").stdout
    assert "up [--no-accounting] [--nodes N]" in out and "partition scale holds node[1-N]" in out
