"""A node's ranks started by the node supervisor itself, without torchrun's agent (``launch.agent: none``).

torchrun's agent is a Python process per node that imports torch (~1 s of CPU) only to start the ranks and
watch them. With a fixed world (no elastic membership, ``--max-restarts=0``) the supervisor can do that job:
it starts the per-rank command once per local rank, each with the variables torchrun would give it (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR = the head node, MASTER_PORT), and
the ranks meet through torch's ``env://`` rendezvous (rank 0's TCP store on the head node).

`RankGroup` looks like one ``subprocess.Popen`` to the supervisor: signals go to every rank, and the group ends
like torchrun with ``--max-restarts=0``: the first rank that fails has the others stopped (TERM, then KILL after
`STOP_GRACE` seconds) and its exit code is the node's. Standard library only.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Mapping

STOP_GRACE = 30.0  # seconds the other ranks get to leave after one failed (torchrun's default too)
_TORCHRUN_ONLY = ("TORCHELASTIC_", "PET_")  # an agent's variables: nothing here must look like one


def rank_env(base: Mapping[str, str], *, node_rank: int, nnodes: int, nproc: int, local_rank: int) -> dict[str, str]:
    """The environment of local rank `local_rank` on node `node_rank`: `base` without any agent's variables,
    plus what torch's env:// rendezvous and the recipes read. MASTER_ADDR is the head node (HPCLAUNCH_HEAD_NODE),
    where node 0's rank 0 holds the store on MASTER_PORT."""
    env = {k: v for k, v in base.items() if not k.startswith(_TORCHRUN_ONLY)}
    head = base.get("HPCLAUNCH_HEAD_NODE") or base.get("MASTER_ADDR") or "127.0.0.1"
    env.update(
        RANK=str(node_rank * nproc + local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(nnodes * nproc),
        LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK=str(node_rank), NODE_RANK=str(node_rank),
        ROLE_RANK=str(node_rank * nproc + local_rank), ROLE_WORLD_SIZE=str(nnodes * nproc),
        MASTER_ADDR=head, MASTER_PORT=base.get("MASTER_PORT") or "29500",
    )
    if nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun: ranks sharing a node do not each take every core
    return env


class RankGroup:
    """The node's ranks, each `argv` with its own environment; waited for and signalled as one process."""

    def __init__(self, argv: list[str], env: Mapping[str, str], *, nnodes: int, nproc: int) -> None:
        node_rank = int(env.get("HPCLAUNCH_NODE_RANK", "0") or 0)
        if not 0 <= node_rank < nnodes:
            raise SystemExit(f"hpclaunch: node rank {node_rank} is outside the job's {nnodes} node(s)")
        # one node: a free port of this host, as torchrun --standalone takes one (the job's port, derived from its
        # id, can repeat on a shared login node: every user's local jobs are local-1, local-2, ...)
        alone = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": free_port()} if nnodes == 1 else {}
        self.ranks = [subprocess.Popen(argv, env={**rank_env(env, node_rank=node_rank, nnodes=nnodes, nproc=nproc,
                                                             local_rank=i), **alone}) for i in range(nproc)]
        self.pid = self.ranks[0].pid
        self.failed: int | None = None  # the first failing rank's exit status
        self.kill_at: float | None = None

    def send_signal(self, signum: int) -> None:
        for p in self.ranks:
            if p.poll() is None:
                p.send_signal(signum)

    def poll(self) -> int | None:
        """None while a rank runs; then the first failure's status, else 0. A failure stops the others."""
        codes = [p.poll() for p in self.ranks]
        if self.failed is None:
            self.failed = next((c for c in codes if c), None)
            if self.failed is not None:
                self.send_signal(signal.SIGTERM)
                self.kill_at = time.monotonic() + STOP_GRACE
        if self.kill_at is not None and time.monotonic() > self.kill_at:
            self.send_signal(signal.SIGKILL)
            self.kill_at = None  # once: a killed rank is gone at the next poll
        if any(c is None for c in codes):
            return None
        return self.failed or 0

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired("ranks", timeout or 0.0)
            time.sleep(0.1)
        return code


def free_port() -> str:
    """A TCP port free on this host now (the kernel's choice, in its ephemeral range)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def group_size(text: str) -> tuple[int, int]:
    """``NNODES:NPROC`` (the supervisor's ``--ranks`` option) as two positive integers."""
    nnodes, _, nproc = text.partition(":")
    values = int(nnodes), int(nproc)
    if min(values) < 1:
        raise ValueError(text)
    return values

