"""What each speed lever buys, one training step at a time, on one NVIDIA GPU: the recipes' models at full width
from their configs (random weights, random tokens), the same step the TorchEngine runs (bf16 autocast, fused
AdamW, gradient clipping, torch.compile), one variant after another in one process.

    python benchmarks/gpu_levers.py                          # every variant (minutes: each compiles)
    python benchmarks/gpu_levers.py --only gpt2-fast,bert-sparse --steps 20
    python benchmarks/gpu_levers.py --tiny --device cpu      # the script itself, on a CPU, in seconds
    python benchmarks/gpu_levers.py --only bert-sparse --snapshot bert-sparse   # where BERT's peak memory goes

Tokens/s is the median of five timed windows after the warm-up (which holds the compilation); MFU counts
hpclaunch's FLOPs per token (runtime/train/metrics.py) against the device's bf16 peak (runtime/train/peaks.py).
`benchmarks/gpu_recipes.py` measures the same levers through real `hpclaunch submit` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from hpclaunch.runtime.train import fastpath
from hpclaunch.runtime.train.metrics import flops_per_token
from hpclaunch.runtime.train.peaks import peak_tflops

GPT2 = {"model_type": "gpt2", "vocab_size": 50257}
BERT = {"model_type": "bert", "num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16,
        "intermediate_size": 4096, "max_position_embeddings": 512, "vocab_size": 30522}
MIXTRAL = {"model_type": "mixtral", "num_hidden_layers": 1, "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
           "max_position_embeddings": 4096, "vocab_size": 32000}
TINY = {"gpt2": {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 256},
        "bert": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128},
        "mixtral": {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2}}

# name -> (config, task, micro-batch, seq, options); in the order they run (the most telling first)
VARIANTS: dict[str, tuple[dict[str, Any], str, int, int, dict[str, Any]]] = {
    "mixtral-grouped": (MIXTRAL, "causal-lm", 1, 2048, {"experts": "grouped_mm"}),
    "bert-sparse": (BERT, "masked-lm", 16, 512, {"fast": True}),
    "gpt2-fast-v50304": ({**GPT2, "vocab_size": 50304}, "causal-lm", 16, 1024, {"fast": True}),
    "gpt2-hf-v50304": ({**GPT2, "vocab_size": 50304}, "causal-lm", 16, 1024, {}),
    "bert-hf": (BERT, "masked-lm", 16, 512, {}),
    "mixtral-grouped-mb4": (MIXTRAL, "causal-lm", 4, 2048, {"experts": "grouped_mm"}),
    "gpt2-fast-v50304-nodrop": ({**GPT2, "vocab_size": 50304}, "causal-lm", 16, 1024, {"fast": True, "dropout": 0}),
    "gpt2-hf": (GPT2, "causal-lm", 16, 1024, {}),
    "mixtral-eager": (MIXTRAL, "causal-lm", 1, 2048, {"experts": "grouped_mm", "compile": False}),
    # train.compile_mode (not measured yet): CUDA graphs; searched matmul kernels (minutes of compilation)
    "gpt2-fast-v50304-graphs": ({**GPT2, "vocab_size": 50304}, "causal-lm", 16, 1024,
                                {"fast": True, "mode": "reduce-overhead"}),
    "gpt2-fast-v50304-autotune": ({**GPT2, "vocab_size": 50304}, "causal-lm", 16, 1024,
                                  {"fast": True, "mode": "max-autotune-no-cudagraphs"}),
}


def build(config: dict[str, Any], task: str, opts: dict[str, Any], tiny: bool) -> torch.nn.Module:
    import transformers

    kw = {k: v for k, v in config.items() if k != "model_type"}
    if tiny:
        kw.update(TINY[config["model_type"]])
    if opts.get("dropout") is not None:
        kw.update(resid_pdrop=opts["dropout"], embd_pdrop=opts["dropout"], attn_pdrop=opts["dropout"])
    cfg = transformers.AutoConfig.for_model(config["model_type"], **kw)
    cfg.use_cache = False
    cls = transformers.AutoModelForMaskedLM if task == "masked-lm" else transformers.AutoModelForCausalLM
    extra = {"experts_implementation": opts["experts"]} if "experts" in opts else {}
    model = cls.from_config(cfg, **extra)
    if opts.get("fast"):
        assert fastpath.install(model, checkpointing=False, tensor_parallel=1)
    return model


def batch(task: str, mb: int, seq: int, vocab: int, device: str, fast: bool) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, vocab, (mb, seq))
    if task != "masked-lm":
        return {"input_ids": ids.to(device), "labels": ids.to(device)}
    labels = torch.where(torch.rand(ids.shape) < 0.15, ids, torch.full_like(ids, -100))
    out = {"input_ids": ids.to(device), "labels": labels.to(device)}
    if fast:
        out["masked"] = fastpath.masked_positions(labels, device)
    return out


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    config, task, mb, seq, opts = VARIANTS[name]
    if args.tiny:
        mb, seq = 2, 64
    dev = args.device
    model = build(config, task, opts, args.tiny).to(dev)
    flops = flops_per_token(model, seq)  # type: ignore[arg-type]
    compiled = opts.get("compile", True) and dev == "cuda"
    step_model = torch.compile(model, mode=opts.get("mode", "default")) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev == "cuda")
    vocab = model.config.vocab_size
    batches = [batch(task, mb, seq, vocab, dev, bool(opts.get("fast"))) for _ in range(4)]
    torch.cuda.reset_peak_memory_stats() if dev == "cuda" else None

    def step(i: int) -> torch.Tensor:
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
            loss = step_model(**batches[i % len(batches)]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.detach()

    t0 = time.perf_counter()
    snapshot = dev == "cuda" and name in args.snapshot.split(",")
    if snapshot:  # every allocation of the warm-up with its stack: open the file at https://pytorch.org/memory_viz
        torch.cuda.memory._record_memory_history(max_entries=200_000)
    for i in range(args.warmup):
        step(i)
    sync(dev)
    if snapshot:
        torch.cuda.memory._dump_snapshot(str(Path(args.out, f"{name}.memory.pickle")))
        torch.cuda.memory._record_memory_history(enabled=None)
    warm_s = time.perf_counter() - t0
    windows = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(args.steps):
            loss = step(i)
        sync(dev)
        windows.append(args.steps * mb * seq / (time.perf_counter() - t0))
    tps = statistics.median(windows)
    peak = peak_tflops(torch.cuda.get_device_name(0)) if dev == "cuda" else None
    row = {"variant": name, "micro_batch": mb, "seq_len": seq, "tokens_per_s": round(tps),
           "mfu": round(tps * flops / (peak * 1e12), 4) if peak else None, "loss": round(float(loss), 4),
           "warmup_s": round(warm_s, 1), "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
           if dev == "cuda" else None, "options": opts}
    torch._dynamo.reset()
    if dev == "cuda":
        torch.cuda.empty_cache()
    return row


def sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=10, help="steps per timed window (5 windows)")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="tiny models: check the script, not the GPU")
    p.add_argument("--snapshot", default="",
                   help="variants whose warm-up allocations are written to OUT/NAME.memory.pickle")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for name in args.only.split(","):
        try:
            rows.append(measure(name, args))
        except Exception as e:  # noqa: BLE001 - a variant that fails is reported, the others still run
            rows.append({"variant": name, "error": f"{type(e).__name__}: {e}"[:500]})
        print(json.dumps(rows[-1]), flush=True)
        Path(args.out, "levers.json").write_text(json.dumps(rows, indent=1))
    print("\n| variant | micro-batch | tokens/s | MFU | peak GiB | warm-up s |\n|---|---:|---:|---:|---:|---:|")
    for r in rows:
        mfu = f"{r['mfu']:.1%}" if r.get("mfu") else ""
        print(f"| {r['variant']} | {r.get('micro_batch', '')} | {r.get('tokens_per_s', r.get('error', ''))} | {mfu} "
              f"| {r.get('peak_gib') or ''} | {r.get('warmup_s', '')} |")


if __name__ == "__main__":
    main()
