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

What this costs the shared filesystem does not grow with the ranks nor with the log steps' rate: rank 0 appends
its lines (and flushes its trackers) at most every FLUSH_INTERVAL s, the first at once and the rest when the
writer closes at the loop's end or the process exits, and at every checkpoint (a rank killed by SIGKILL loses at
most the lines since the last checkpoint, the steps a relaunch from it computes and logs again); the other
ranks of a supervised launch write theirs into their node's local folder, which the node supervisor appends to the
run directory every few minutes and at the end (hpclaunch/runtime/node/noderecord.py).
"""

from __future__ import annotations

import atexit
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hpclaunch.runtime.node import noderecord
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


FLUSH_INTERVAL = 10.0  # seconds between rank 0's appends to the shared run directory


class MetricsWriter:
    """`spec`: the job's resolved spec, whose `tracking` section names the trackers beyond TensorBoard (W&B);
    `trackers=False`: the JSON lines only (a one-off record, as the model's size after load)."""

    def __init__(self, run_dir: Path, rank: int, spec: JobSpec | None = None, *, trackers: bool = True) -> None:
        local = noderecord.from_env() if rank != 0 else None  # the node supervisor copies it into the run dir
        self.path = noderecord.metrics_file(local, rank) if local else RunFiles(run_dir).metrics_file(rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.every = 0.0 if local else FLUSH_INTERVAL
        self.trackers = tracking.trackers(run_dir, rank, spec) if trackers else []
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.flushed_at = float("-inf")
        atexit.register(self.flush)  # a script that never closes its writer still has its last lines written

    def write(self, kind: str, **record: Any) -> dict[str, Any]:
        """Called at log and eval steps only, with values already on the host; written now, or with the next
        write FLUSH_INTERVAL s after the last one, or when the writer closes."""
        rec = {"kind": kind, **record, "rank": self.rank, "time": round(time.time(), 3)}
        self.pending.append((kind, rec))
        if time.monotonic() - self.flushed_at >= self.every:
            self.flush()
        return rec

    def flush(self) -> None:
        """Append the records not written yet in one write, and hand them to the trackers."""
        self.flushed_at = time.monotonic()
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(rec) + "\n" for _, rec in pending))
        for tracker in self.trackers:
            for kind, rec in pending:
                tracker.write(kind, rec)
            tracker.flush()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(ok=exc_type is None)

    def close(self, ok: bool = True) -> None:
        """At the end of the loop (`ok`: it ended without an error); W&B marks the run finished or failed."""
        self.flush()
        for tracker in self.trackers:
            tracker.close(ok)
        self.trackers = []


def read_metrics(run_dir: Path, rank: int = 0) -> list[dict[str, Any]]:
    p = RunFiles(run_dir).metrics_file(rank)
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.is_file() else []
