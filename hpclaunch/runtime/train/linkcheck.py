"""The health check's links between nodes, in ceil(log2 N) rounds: ``python -m hpclaunch.runtime.train.linkcheck``.

Run by each node's health check before step 0 (hpclaunch/runtime/node/health.py: one process per node, RANK = the
node's rank, WORLD_SIZE = the nodes, MASTER_ADDR/MASTER_PORT its own port), with the profile's process group
(HPCLAUNCH_ACCELERATOR, HPCLAUNCH_BACKEND: gloo on CPU, NCCL/HCCL/MCCL on the first device).

One all-reduce over every node grows with N (gloo's ring: 2(N-1) steps), says nothing about which node is slow,
and with gloo opens a connection from every node to every other (N^2 at start). Here the nodes pair up by
recursive doubling instead: in round k node i exchanges a buffer with node i XOR 2^k (skipped where that is not a
node), so every node meets ceil(log2 N) partners in as many rounds, all pairs of a round at once, and keeps only
those connections (TORCH_GLOO_LAZY_INIT). Each exchange is timed after a one-element handshake (a partner still
busy in an earlier round is not counted as slowness): the lower rank sends then receives, the higher receives
then sends; the bandwidth is the bytes both ways over the time. A partner that does not answer within the
timeout is recorded, and the rounds go on.

Prints one JSON line: backend, nodes, rounds, bytes, ``pairs`` (one {round, partner, gbps} or {round, partner,
error}), ``busbw_gbps`` (the median of this node's answered pairs: one bad link lowers it for neither end when
they have other partners; a bad node lowers all of its own) and ``failed_partners``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from hpclaunch.runtime.node.tcplinks import partners
from hpclaunch.runtime.train.distributed import ACCELERATORS


def _device() -> tuple[str, torch.device]:
    accelerator = os.environ.get("HPCLAUNCH_ACCELERATOR") or "cpu"
    plugin, default_backend = ACCELERATORS.get(accelerator, (None, "gloo"))
    if plugin:
        __import__(plugin)
    backend = os.environ.get("HPCLAUNCH_BACKEND") or default_backend
    if accelerator == "cpu":
        return backend, torch.device("cpu")
    device = torch.device(accelerator, int(os.environ.get("LOCAL_RANK", "0")))
    getattr(torch, accelerator).set_device(device)
    return backend, device


def _wait_done(store: dist.TCPStore, nodes: int, late: float, deadline: float) -> None:
    """Until every node is done or, once nobody can still join (`late`: the store's own wait for clients), every
    node that joined is; at most until `deadline` (every round waiting out a partner)."""
    while time.monotonic() < deadline:
        done, joined = store.add("done", 0), store.add("joined", 0)
        if done >= nodes or (done >= joined and time.monotonic() > late):
            return
        time.sleep(0.05)


def _exchange(data: torch.Tensor, partner: int, first: bool) -> None:
    if first:
        dist.send(data, partner)
        dist.recv(data, partner)
    else:
        dist.recv(data, partner)
        dist.send(data, partner)


def measure(mib: int, iters: int, timeout: float) -> dict[str, object]:
    backend, device = _device()
    os.environ.setdefault("TORCH_GLOO_LAZY_INIT", "1")  # connect to this node's partners only, not to every node
    node, nodes = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # a partner held up by partners that never came in its earlier rounds arrives up to a timeout per round late
    wait = datetime.timedelta(seconds=timeout * (len(partners(node, nodes)) + 1))
    # node 0 holds the store without waiting for every node to join it: a node that never came blames itself
    # (no result) and its partners (one pair each), not every node of the job
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), nodes, is_master=node == 0,
                          timeout=wait, wait_for_workers=False)
    dist.init_process_group(backend=backend, store=store, rank=node, world_size=nodes, timeout=wait)
    started = time.monotonic()
    store.add("joined", 1)
    data = torch.ones(mib * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    token = torch.zeros(1, dtype=torch.float32, device=device)
    sync = getattr(torch, device.type).synchronize if device.type != "cpu" else (lambda: None)
    pairs: list[dict[str, object]] = []
    for k, partner in partners(node, nodes):
        first = node < partner
        try:
            _exchange(token, partner, first)  # the handshake: both ends are in this round
            _exchange(data, partner, first)  # warm-up (connection buffers)
            times = []
            for _ in range(iters):
                sync()
                t0 = time.perf_counter()
                _exchange(data, partner, first)
                sync()
                times.append(time.perf_counter() - t0)
        except RuntimeError as exc:  # gloo/NCCL: the partner timed out or its connection dropped
            pairs.append({"round": k, "partner": partner, "error": str(exc).splitlines()[0][:200]})
            continue
        seconds = statistics.median(times)
        pairs.append({"round": k, "partner": partner, "seconds": round(seconds, 6),
                      "gbps": round(2 * data.numel() * 4 / seconds / 1e9, 4)})
    answered = [float(p["gbps"]) for p in pairs if "gbps" in p]  # type: ignore[arg-type]
    store.add("done", 1)
    if node == 0:  # the store's holder leaves last: every node that joined meets its later partners through it
        _wait_done(store, nodes, started + timeout, started + timeout * (len(partners(0, nodes)) + 2))
    try:
        dist.destroy_process_group()
    except RuntimeError:
        pass
    return {"backend": backend, "nodes": nodes, "rounds": max(1, (nodes - 1).bit_length()),
            "bytes": data.numel() * 4, "pairs": pairs,
            "busbw_gbps": round(statistics.median(answered), 4) if answered else None,
            "failed_partners": [p["partner"] for p in pairs if "error" in p]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.train.linkcheck")
    p.add_argument("--mib", type=int, default=16, help="size of the exchanged buffer in MiB")
    p.add_argument("--iters", type=int, default=3, help="timed exchanges per partner after one warm-up")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the nodes and each partner")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.mib, args.iters, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
