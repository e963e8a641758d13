"""Names of the files a job writes into its run directory. Shared by the job side (rank_exec, the
recipe runtime) and the reading side (hpclaunch logs/status/report), so both agree.

    RUN_DIR/job.sbatch, resolved.yaml, ds_config.json
    RUN_DIR/logs/job.<jobid>.out                      the batch script's output (appended across requeues)
    RUN_DIR/logs/rank-<R>.restart-<N>.log             one file per rank and restart (torchrun, deepspeed)
    RUN_DIR/logs/msrun/node<K>.restart-<N>/worker_<R>.log, scheduler.log   (msrun)
    RUN_DIR/metrics/rank-<R>.jsonl                    metrics, JSON lines, appended across restarts
    RUN_DIR/checkpoints/                              checkpoints
"""

from __future__ import annotations

import re
from pathlib import Path

RANK_LOG = re.compile(r"^rank-(\d+)\.restart-(\d+)\.log$")


def rank_log(log_dir: Path, rank: int, restart: int) -> Path:
    return Path(log_dir) / f"rank-{rank}.restart-{restart}.log"


def metrics_file(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / "metrics" / f"rank-{rank}.jsonl"


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"
