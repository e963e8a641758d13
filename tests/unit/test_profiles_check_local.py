"""`profiles check` of the local profile, `--on-node` included: this machine is the node."""

from __future__ import annotations

import json


def test_local_profile_on_node(hpclaunch) -> None:
    res = hpclaunch("profiles", "check", "local", "--on-node", "--json")
    assert res.exit_code == 0, res.output
    found = {r["name"]: r for r in json.loads(res.stdout)}
    assert found["profile"]["ok"] and found["python executable"]["ok"]
    assert found["on node (local)"]["ok"] and found["on node: torch"]["ok"], found
