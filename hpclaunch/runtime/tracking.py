"""Trackers beside the metrics JSON lines: TensorBoard event files in ``RUN_DIR/tensorboard/``, from rank 0.

They are written where the metrics are (`MetricsWriter.write`: log and eval steps, whose values the loop has
already brought to the host), so a tracker adds no device sync. Nothing here touches the network:
``tensorboard --logdir ~/.hpclaunch/runs`` reads every run's events from a login node.

    tag                    metrics field (kind)
    train/loss             loss (train)
    train/lr               lr
    train/grad_norm        grad_norm
    train/tokens_per_s     tokens_per_s (whole job)
    train/mfu              mfu (when the partition's peak_tflops is known)
    eval/loss              eval_loss (eval)
    eval/perplexity        perplexity
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hpclaunch.runfiles import RunFiles

TAGS: dict[str, dict[str, str]] = {
    "train": {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
              "tokens_per_s": "train/tokens_per_s", "mfu": "train/mfu"},
    "eval": {"eval_loss": "eval/loss", "perplexity": "eval/perplexity"},
}


class TensorBoard:
    """One event file per process start (a resumed run adds one); TensorBoard reads them as one run."""

    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, kind: str, record: dict[str, Any]) -> None:
        step = record.get("step")
        if not isinstance(step, int):
            return
        for key, tag in TAGS.get(kind, {}).items():
            value = record.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(tag, value, step, walltime=record.get("time"))
        self._writer.flush()  # a log step is rare: a killed job keeps everything logged so far

    def close(self) -> None:
        self._writer.close()


def tensorboard(run_dir: Path, rank: int) -> TensorBoard | None:
    """Rank 0's TensorBoard writer; None on other ranks, and when tensorboard is not installed in the job's
    environment (said once on stderr: the metrics JSON lines are written all the same)."""
    if rank != 0:
        return None
    try:
        return TensorBoard(RunFiles(run_dir).tensorboard)
    except ImportError as exc:
        print(f"hpclaunch: warning: no TensorBoard events ({exc}); `pip install tensorboard` in the job's "
              "environment to have them", file=sys.stderr, flush=True)
        return None
