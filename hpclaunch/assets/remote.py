"""Stage assets inside a Slurm job, through submitit, on a partition that has internet access (a
transfer or data-mover partition): on many clusters the login node has no network, or kills long
downloads, while compute partitions have none at all. The job runs the same staging code into the
same store (a shared filesystem) and hands its results back; this process waits for it."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

from hpclaunch.assets.requests import AssetRequest
from hpclaunch.assets.stage import StageResult, stage_many
from hpclaunch.errors import AssetError


def stage_all(requests: Sequence[AssetRequest], store: Path, endpoints: Sequence[str], *, workers: int,
              verify: bool, timeout: float) -> tuple[list[StageResult], list[str], str]:
    """What the Slurm job runs: stage_many, plus the name of the host that did it."""
    results, errors = stage_many(requests, store, endpoints, workers=workers, verify=verify, timeout=timeout)
    return results, errors, socket.gethostname()


def stage_via_slurm(requests: Sequence[AssetRequest], store: Path, endpoints: Sequence[str], *,
                    partition: str, folder: Path, workers: int, verify: bool, timeout: float,
                    time_min: int = 60, on_submit=None) -> tuple[list[StageResult], list[str], str]:
    """Run `stage_all` as a Slurm job on `partition` and wait for it; submitit keeps its files in `folder`."""
    from hpclaunch.core.extras import need

    submitit = need("submitit")
    executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm")
    executor.update_parameters(name="hpclaunch-stage", slurm_partition=partition, timeout_min=time_min,
                               nodes=1, tasks_per_node=1, cpus_per_task=1)
    job = executor.submit(stage_all, list(requests), store, list(endpoints), workers=workers, verify=verify,
                          timeout=timeout)
    if on_submit is not None:
        on_submit(job.job_id)
    try:
        return job.result()
    except Exception as exc:  # submitit re-raises the job's failure with its traceback
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        raise AssetError(f"the staging job {job.job_id} on partition {partition!r} failed: "
                         f"{lines[-1] if lines else type(exc).__name__}",
                         hint=f"its output: {folder / job.job_id}") from None
