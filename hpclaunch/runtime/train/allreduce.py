"""A short all-reduce across the job's nodes and its bandwidth: ``python -m hpclaunch.runtime.train.allreduce``.

Run by each node's health check before step 0 (hpclaunch/runtime/node/health.py: one process per node, RANK =
the node's rank, WORLD_SIZE = the nodes, MASTER_ADDR/MASTER_PORT its own port). The process group is the
profile's (HPCLAUNCH_ACCELERATOR, HPCLAUNCH_BACKEND: gloo on CPU, NCCL/HCCL/MCCL on the first device), set up
here and not by runtime.train.distributed, which stamps the timeline and writes progress records for the
training's ranks. Prints one JSON line: backend, bytes, seconds per all-reduce (the median of ``--iters``
after one warm-up), ``algbw_gbps`` (bytes / time) and ``busbw_gbps`` (algbw x 2 (n-1) / n, as nccl-tests
report it: what each link carried, comparable across node counts).
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


def measure(mib: int, iters: int, timeout: float) -> dict[str, float | str | int]:
    backend, device = _device()
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout))
    world = dist.get_world_size()
    data = torch.ones(mib * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    times = []
    for i in range(iters + 1):
        sync = getattr(torch, device.type).synchronize if device.type != "cpu" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        dist.all_reduce(data)
        sync()
        if i:  # the first is the warm-up (connections, buffers)
            times.append(time.perf_counter() - t0)
    dist.barrier()
    dist.destroy_process_group()
    seconds = statistics.median(times)
    nbytes = data.numel() * 4
    algbw = nbytes / seconds / 1e9
    return {"backend": backend, "nodes": world, "bytes": nbytes, "seconds": round(seconds, 6),
            "algbw_gbps": round(algbw, 4), "busbw_gbps": round(algbw * 2 * (world - 1) / world, 4)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.train.allreduce")
    p.add_argument("--mib", type=int, default=16, help="size of the reduced tensor in MiB")
    p.add_argument("--iters", type=int, default=3, help="timed all-reduces after one warm-up")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for every node")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.mib, args.iters, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
