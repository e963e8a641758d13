"""The rendezvous port a job derives from its id stays below Linux's ephemeral port range (32768-60999), where
an outgoing connection of the node could already hold it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def test_master_port_is_below_the_ephemeral_range(hpclaunch, hpc_home: Path) -> None:
    res = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run")
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.stdout.splitlines() if x.startswith("export MASTER_PORT=")]
    ids = [str(i) for i in range(1, 400)] + [f"{j}_{t}" for j in (98765, 4242) for t in range(50)] + ["local-7"]
    script = "for HPCLAUNCH_JOB_ID in " + " ".join(ids) + f"; do {line}; echo $MASTER_PORT; done"
    ports = [int(p) for p in subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                                            check=True).stdout.split()]
    assert len(ports) == len(ids) and all(20000 <= p < 32768 for p in ports), (min(ports), max(ports))
    assert len(set(ports)) > len(ids) * 0.9  # still spread: two jobs rarely share one
