"""Metrics as JSON lines, one file per rank (RUN_DIR/metrics/rank-<R>.jsonl, appended across restarts).

    {"kind": "train", "step", "loss", "lr", "grad_norm", "tokens_per_s", "samples_per_s",
     "peak_mem_bytes", "mfu", "rank", "world_size", "time"}
    {"kind": "eval", "step", "eval_loss", "perplexity", "rank", "time"}
    {"kind": "model", "params", "param_bytes", "held_param_bytes", "world_size", "rank", "time"}  (after load)
    {"kind": "states", "param_bytes", "grad_bytes", "optimizer_bytes", "world_size", "rank", "time"}
        (after the first step: the model states this rank holds, hpclaunch/runtime/train/held.py)

`tokens_per_s` and `samples_per_s` are for the whole job (all ranks); `mfu` is model FLOPs
utilisation per device (null when the partition's `peak_tflops` is unknown). Rank 0 also writes each record
to its trackers: TensorBoard scalars, and W&B when the job's tracking.wandb is on (hpclaunch.runtime.train.tracking).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hpclaunch.runtime.train import tracking
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from hpclaunch.config.jobspec import JobSpec


def full_numel(p: torch.Tensor) -> int:
    """Elements of the whole parameter, also when ZeRO-3 has partitioned it (then `numel()` is 0)."""
    return int(getattr(p, "ds_numel", 0) or p.numel())


_POSITION = re.compile(r"(^|\.)(wpe|position_embeddings|token_type_embeddings)\.weight$")


def flops_per_token(model: PreTrainedModel, seq_len: int) -> float:
    """Training FLOPs per token: 6 N + 12 L H T (PaLM appendix B), N = the parameters a token multiplies:
    all but the input and position embeddings (lookups), plus the output projection when it is tied to
    the input embedding (GPT-2, BERT: one tensor, counted once by model.parameters(), used twice)."""
    cfg = model.config
    layers = getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "n_layer", 0)
    hidden = getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0)
    emb_weight = cast("torch.Tensor", model.get_input_embeddings().weight)  # typed Tensor | Module by torch
    emb = full_numel(emb_weight)
    lookups = emb + sum(full_numel(p) for name, p in model.named_parameters() if _POSITION.search(name))
    n = sum(full_numel(p) for p in model.parameters()) - lookups
    out = model.get_output_embeddings()
    if out is not None and out.weight is emb_weight:  # tied: the LM head is a matmul over the vocabulary
        n += emb
    if getattr(cfg, "num_local_experts", None):  # MoE: only the routed experts run per token
        share = cfg.num_experts_per_tok / cfg.num_local_experts
        experts = sum(full_numel(p) for name, p in model.named_parameters() if ".experts." in name)
        n -= experts * (1 - share)
    return 6 * n + 12 * layers * hidden * seq_len


class MetricsWriter:
    """`spec`: the job's resolved spec, whose `tracking` section names the trackers beyond TensorBoard (W&B);
    `trackers=False`: the JSON lines only (a one-off record, as the model's size after load)."""

    def __init__(self, run_dir: Path, rank: int, spec: JobSpec | None = None, *, trackers: bool = True) -> None:
        self.path = RunFiles(run_dir).metrics_file(rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.trackers = tracking.trackers(run_dir, rank, spec) if trackers else []

    def write(self, kind: str, **record: Any) -> dict[str, Any]:
        """Called at log and eval steps only, with values already on the host."""
        rec = {"kind": kind, **record, "rank": self.rank, "time": round(time.time(), 3)}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        for tracker in self.trackers:
            tracker.write(kind, rec)
        return rec

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(ok=exc_type is None)

    def close(self, ok: bool = True) -> None:
        """At the end of the loop (`ok`: it ended without an error); W&B marks the run finished or failed."""
        for tracker in self.trackers:
            tracker.close(ok)
        self.trackers = []


def read_metrics(run_dir: Path, rank: int = 0) -> list[dict[str, Any]]:
    p = RunFiles(run_dir).metrics_file(rank)
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.is_file() else []
