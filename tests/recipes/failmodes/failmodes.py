"""Fail on purpose, the way real training scripts fail, to test `hpclaunch logs --diagnose`.

--mode raise  --rank R   rank R raises a ValueError after the first all-reduce; the others wait in a barrier
--mode port              rank 0 holds a port, then asks torch.distributed to listen on it (EADDRINUSE)
--mode asset  --rank R   rank R loads a model from the Hub with the job's offline settings (not staged)
--mode metrics           no failure: rank 0 writes 20 steps of metrics to RUN_DIR/metrics/rank-0.jsonl
"""

import argparse
import json
import os
import socket
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--config")
parser.add_argument("--mode", choices=["raise", "port", "asset", "metrics"], required=True)
parser.add_argument("--rank", type=int, default=1)
args = parser.parse_args()
rank = int(os.environ["RANK"])

if args.mode == "port":
    from datetime import timedelta

    import torch.distributed as dist

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    if rank == 0:
        print(f"rank 0 holds port {port} and asks torch.distributed to listen on it", flush=True)
        dist.TCPStore("127.0.0.1", port, int(os.environ["WORLD_SIZE"]), True, timeout=timedelta(seconds=10))
    time.sleep(120)  # the other ranks wait until torchrun ends them

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group(os.environ.get("HPCLAUNCH_BACKEND", "gloo"))
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: all-reduce gave {t.item():g}", flush=True)

if args.mode == "raise" and rank == args.rank:
    time.sleep(1)
    raise ValueError(f"bad batch shape on rank {rank}: expected (8, 128), got (8, 127)")
if args.mode == "asset" and rank == args.rank:
    from transformers import AutoConfig

    AutoConfig.from_pretrained("hpclaunch-test/not-staged-model")
if args.mode == "metrics" and rank == 0:
    out = Path(os.environ["HPCLAUNCH_RUN_DIR"]) / "metrics" / "rank-0.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as f:
        for step in range(1, 21):
            rec = {
                "step": step,
                "loss": 5.0 / step,
                "lr": 1e-3 * min(1, step / 5),
                "grad_norm": 1.0 / step,
                "tokens_per_s": 1000.0 + step,
                "samples_per_s": 8.0,
                "peak_mem_bytes": 1 << 20,
            }
            f.write(json.dumps(rec) + "\n")
        f.write(json.dumps({"step": 20, "eval_loss": 0.3, "perplexity": 1.35}) + "\n")
dist.barrier()
dist.destroy_process_group()
