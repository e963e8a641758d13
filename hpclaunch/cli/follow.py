"""Wait for a job and stream its output (`submit --follow`)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from hpclaunch import registry
from hpclaunch.errors import JobFailed
from hpclaunch.schedulers import get_scheduler


def _stream(path: Path, offset: int) -> int:
    if not path.is_file():
        return offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    if data:
        click.echo(data.decode(errors="replace"), nl=False)
    return offset + len(data)


def follow_job(job_id: str, *, poll: float = 1.0) -> None:
    record = registry.get(job_id)
    scheduler = get_scheduler(record.scheduler)
    out = Path(record.run_dir) / "logs" / f"job.{job_id}.out"
    offset = 0
    while True:
        status = scheduler.status([job_id])[job_id]
        offset = _stream(out, offset)
        if status.finished:
            break
        time.sleep(poll)
    time.sleep(0.2)
    _stream(out, offset)
    click.echo(f"job {job_id} {status.state}" + (f" (exit {status.exit_code})" if status.exit_code else ""),
               err=True)
    if status.state != "COMPLETED":
        raise JobFailed(f"job {job_id} ended {status.state}",
                        hint=f"hpclaunch logs {job_id} --diagnose")
