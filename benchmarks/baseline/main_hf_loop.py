"""Seed 000's `main_hf.py` training loop, kept as it was (bugs included: it clips before backward,
never zeroes gradients, syncs the device every step), for the side-by-side throughput benchmark.

Only the parts around the loop are replaced so that it trains the very same model on the very same
blocks as the recipe run it is compared with: model, tokenizer and data come from the recipe's cached
assets (hpclaunch.runtime.train.build / data), read through the run's resolved.yaml. Run under torchrun, on
the CPU (gloo) or, with --device cuda, on GPUs (nccl, and the seed's torch.cuda.synchronize() per step):

    torchrun --standalone --nproc-per-node=2 benchmarks/baseline/main_hf_loop.py \
        --config RUN/resolved.yaml --steps 60 [--device cuda]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from transformers import default_data_collator, get_scheduler

from hpclaunch.config.jobspec import load_jobspec
from hpclaunch.runtime.train import build, data
from hpclaunch.runtime.train.distributed import Dist
from hpclaunch.runtime.train.tokenizer import load_tokenizer


def print_rank_0(message):
    if dist.get_rank() == 0:
        print(message, flush=True)


def record_timestamp():
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()  # seed 000 did this every step; on CPU there is nothing to wait for
    return time.time()


class Blocks(torch.utils.data.Dataset):
    def __init__(self, blocks):
        self.blocks = blocks

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, i):
        ids = self.blocks[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--out", default=None)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()

    backend = "nccl" if args.device == "cuda" else "gloo"
    dist.init_process_group(backend)
    world_size = dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(123)
    spec = load_jobspec(args.config)
    d = Dist(dist.get_rank(), world_size, local_rank, args.device, backend, device)
    tokenizer, src = load_tokenizer(spec, d)
    model, _ = build.load_model(spec, tokenizer, d)
    batch_size, seq_len = spec.recipe.train.micro_batch_size, spec.recipe.train.seq_len
    model = model.to(device)
    model = DDP(model, device_ids=[device] if args.device == "cuda" else None)
    train_dataset = Blocks(data.prepare_blocks(spec, tokenizer, src, d)["train"])
    train_dataloader = DataLoader(
        train_dataset,
        collate_fn=default_data_collator,
        shuffle=False,
        batch_size=batch_size,
        sampler=DistributedSampler(train_dataset),
    )

    lr = 1e-4 * world_size
    optimizer = torch.optim.AdamW(params=model.parameters(), lr=lr, weight_decay=0.1)
    scheduler = get_scheduler(
        name="cosine", optimizer=optimizer, num_warmup_steps=100, num_training_steps=len(train_dataloader)
    )
    windows = []
    train_loss = 0.0
    model.train()
    start_time = record_timestamp()
    window_start = time.perf_counter()
    for batch_idx, batch_data in enumerate(train_dataloader):
        if batch_idx == args.steps:
            break
        batch_data["input_ids"] = batch_data["input_ids"].to(device)
        batch_data["attention_mask"] = batch_data["attention_mask"].to(device)
        batch_data["labels"] = batch_data["labels"].to(device)

        outputs = model(**batch_data)
        loss = outputs.loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        loss.backward()
        optimizer.step()
        scheduler.step()
        end_time = record_timestamp()

        train_loss += loss
        duration = end_time - start_time
        train_tokens_throughput = batch_size * seq_len * world_size / duration

        if batch_idx % 10 == 0:
            print_rank_0(
                f"step[{batch_idx}/{len(train_dataloader) - 1}]: "
                f"train_loss: {train_loss.item() / (batch_idx + 1)}, "
                f"train_tokens_throughput: {train_tokens_throughput} tokens/s"
            )
        if (batch_idx + 1) % 10 == 0:  # the benchmark's own window clock (same as the recipe's log windows)
            now = time.perf_counter()
            windows.append(10 * batch_size * seq_len * world_size / (now - window_start))
            window_start = now
        start_time = record_timestamp()
    if dist.get_rank() == 0 and args.out:
        with open(args.out, "w") as f:
            peak = torch.cuda.max_memory_allocated(device) if args.device == "cuda" else None
            json.dump({"tokens_per_s_windows": windows, "peak_mem_bytes": peak}, f)
    dist.destroy_process_group()
