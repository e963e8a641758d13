"""All-reduce (rank + 1) over every rank and print rank, world size, host and the reduced value.

Run under torchrun (or DeepSpeed with --deepspeed_config): the expected sum is W * (W + 1) / 2.
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--config")
parser.add_argument("--deepspeed_config")
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--fail-rank", type=int, default=-1)
args = parser.parse_args()

backend = os.environ.get("HPCLAUNCH_BACKEND", "gloo")
if args.deepspeed_config:
    import deepspeed

    deepspeed.init_distributed(dist_backend=backend)
else:
    dist.init_process_group(backend=backend)

rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} world_size={world} local_rank={os.environ.get('LOCAL_RANK')} host={socket.gethostname()} "
      f"reduced={value.item():g} expected={world * (world + 1) / 2:g} "
      f"module={os.environ.get('HPCLAUNCH_DEV_MODULE', '-')} "
      f"launcher={'deepspeed' if args.deepspeed_config else 'torchrun'}",
      flush=True)
if rank == args.fail_rank:
    raise RuntimeError(f"rank {rank} was asked to fail")
if args.sleep:
    time.sleep(args.sleep)
dist.barrier()
dist.destroy_process_group()
