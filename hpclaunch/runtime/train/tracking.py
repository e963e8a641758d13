"""Trackers beside the metrics JSON lines, from rank 0: TensorBoard event files in ``RUN_DIR/tensorboard/``
always (when tensorboard is installed), and Weights & Biases when the job's `tracking.wandb` has a project.

They are written where the metrics are (`MetricsWriter.write`: log and eval steps, whose values the loop has
already brought to the host), so a tracker adds no device sync. Nothing here needs the network:
``tensorboard --logdir ~/.hpclaunch/runs`` reads every run's events from a login node, and W&B runs offline by
default, into ``RUN_DIR/wandb/offline-run-<time>-<id>/`` (one per start of the job: a requeued or resumed job
adds one with the same W&B run id, so they upload as one run); ``hpclaunch sync JOB`` uploads them from a node
with network (hpclaunch/jobs/sync.py). Both trackers get the same tags:

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

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hpclaunch.errors import HpclaunchError
from hpclaunch.state.runfiles import ELEMENT_PREFIX, RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

TAGS: dict[str, dict[str, str]] = {
    "train": {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
              "tokens_per_s": "train/tokens_per_s", "mfu": "train/mfu"},
    "eval": {"eval_loss": "eval/loss", "perplexity": "eval/perplexity"},
}


class Tracker(Protocol):
    def write(self, kind: str, record: dict[str, Any]) -> None: ...

    def flush(self) -> None: ...

    def close(self, ok: bool = True) -> None: ...


def _scalars(kind: str, record: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, tag in TAGS.get(kind, {}).items():
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[tag] = value
    return out


class TensorBoard:
    """One event file per process start (a resumed run adds one); TensorBoard reads them as one run."""

    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, kind: str, record: dict[str, Any]) -> None:
        step = record.get("step")
        if not isinstance(step, int):
            return
        for tag, value in _scalars(kind, record).items():
            self._writer.add_scalar(tag, value, step, walltime=record.get("time"))

    def flush(self) -> None:
        """After each batch of records (hpclaunch.runtime.train.metrics): a killed job keeps what was flushed."""
        self._writer.flush()

    def close(self, ok: bool = True) -> None:
        self._writer.close()


def wandb_run_id(run_dir: Path) -> str:
    """The W&B run id of a run directory: its folder name (a sweep element: the sweep's folder name and the
    element's), in the characters W&B allows, at most 64. The same on every start of the job."""
    name = run_dir.name
    if name.startswith(ELEMENT_PREFIX):
        name = f"{run_dir.parent.name}-{name}"
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "run"
    return name[-64:]


def wandb_config(spec: JobSpec) -> dict[str, Any]:
    """What the W&B run shows as its config: the recipe as resolved and where it ran."""
    from hpclaunch.config.base import dump

    return {"recipe": dump(spec.recipe), "preset": spec.preset, "profile": spec.profile.name,
            "partition": spec.partition, "nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node,
            "world_size": spec.world_size, "global_batch_size": spec.global_batch_size,
            "grad_accum": spec.grad_accum, "data_parallel": spec.data_parallel, "sets": list(spec.sets),
            "hpclaunch_version": spec.hpclaunch_version}


class Wandb:
    """One W&B run per job (resumed, not restarted, by a requeue); console capture off (the rank logs have it)."""

    def __init__(self, spec: JobSpec, run_dir: Path) -> None:
        import wandb

        w = spec.tracking.wandb
        assert w is not None
        group = w.group
        if group is None and run_dir.name.startswith(ELEMENT_PREFIX):
            group = run_dir.parent.name  # a sweep's elements side by side
        self.run = wandb.init(
            project=w.project, entity=w.entity, group=group, tags=list(w.tags) or None, name=spec.name,
            id=wandb_run_id(run_dir), resume="allow", mode=w.mode, dir=str(run_dir), config=wandb_config(spec),
            settings=wandb.Settings(console="off", silent=True))

    def write(self, kind: str, record: dict[str, Any]) -> None:
        step = record.get("step")
        values = _scalars(kind, record)
        if isinstance(step, int) and values:
            self.run.log(values, step=step)

    def flush(self) -> None:
        """W&B writes its own file at its own pace."""

    def close(self, ok: bool = True) -> None:
        self.run.finish(exit_code=0 if ok else 1)


def trackers(run_dir: Path, rank: int, spec: JobSpec | None) -> list[Tracker]:
    """Rank 0's trackers: TensorBoard, and W&B when `spec.tracking.wandb` is set (none on other ranks)."""
    if rank != 0:
        return []
    found: list[Tracker] = []
    tb = tensorboard(run_dir, rank)
    if tb is not None:
        found.append(tb)
    if spec is not None and spec.tracking.wandb is not None:
        try:
            found.append(Wandb(spec, run_dir))
        except ImportError as exc:
            raise HpclaunchError(f"tracking.wandb.project is {spec.tracking.wandb.project!r} but W&B is not "
                                 f"installed in the job's environment ({exc})",
                                 hint="pip install wandb in the job's environment, or submit with "
                                      "--set tracking.wandb.mode=disabled") from None
        mode = spec.tracking.wandb.mode
        where = RunFiles(run_dir).wandb
        print(f"hpclaunch: W&B run {wandb_run_id(run_dir)} ({mode}) in {where}"
              + ("; `hpclaunch sync JOB` uploads it from a node with network" if mode == "offline" else ""),
              file=sys.stderr, flush=True)
    return found


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
