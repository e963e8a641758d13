"""hpclaunch sync JOB... (hpclaunch/jobs/sync.py does the work)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option

if TYPE_CHECKING:
    from hpclaunch.api import JobRuns


@click.command("sync", epilog=examples(
    "hpclaunch sync 12345  # on a login node: upload job 12345's offline W&B runs",
    "hpclaunch sync 12350  # a sweep: every element",
    "hpclaunch sync 12345 --dry-run  # what would be uploaded",
    "hpclaunch sync ~/.hpclaunch/runs/20261123-0905-gpt2-1a2b3c  # a run directory",
    "WANDB_BASE_URL=https://wandb.example.org hpclaunch sync 12345  # a self-hosted server"))
@click.argument("jobs", nargs=-1, shell_complete=complete.job, required=True, metavar="JOB...")
@click.option("--dry-run", is_flag=True, help="list each job's offline W&B runs and what would be uploaded; "
              "upload nothing")
@click.option("--include-synced", is_flag=True, help="upload again what was uploaded before")
@click.option("--project", default=None, help="upload into this W&B project instead of the job's")
@click.option("--entity", default=None, help="upload into this W&B entity (user or team) instead of the job's")
@json_option
def sync_cmd(jobs: tuple[str, ...], dry_run: bool, include_synced: bool, project: str | None,
             entity: str | None, as_json: bool) -> None:
    """Upload the offline Weights & Biases runs of each JOB (job id, sweep id or run directory) from a node with
    network. Jobs write them into RUN_DIR/wandb/ when tracking.wandb is on (offline by default: compute nodes
    need no network). W&B's own uploader does the work; the credentials are W&B's (`wandb login`,
    WANDB_API_KEY, WANDB_BASE_URL). A job still running keeps its newest run for a later sync."""
    from hpclaunch import api

    found = api.sync_find(jobs)
    if not as_json:
        for j in found:
            click.echo(_line(j, include_synced))
    uploaded = [] if dry_run else api.sync_upload(found, include_synced=include_synced, project=project,
                                                  entity=entity)
    if as_json:
        echo_json({"dry_run": dry_run, "uploaded": [str(s.path) for s in uploaded],
                   "jobs": [j.as_dict(include_synced) for j in found]})
        return
    if dry_run:
        click.echo("dry run: nothing uploaded")
    elif uploaded:
        click.echo(f"uploaded {len(uploaded)} offline W&B run(s)")
    else:
        click.echo("nothing to upload" + ("" if include_synced else " (--include-synced uploads again)"))


def _line(j: JobRuns, include_synced: bool) -> str:
    if not j.segments:
        if j.online:
            return f"{j.label}: its W&B run was online (the job streamed it): nothing to upload"
        return f"{j.label}: no W&B runs (it ran without tracking.wandb)"
    todo = j.to_upload(include_synced)
    done = sum(s.synced for s in j.segments)
    text = (f"{j.label}: W&B run {', '.join(j.run_ids)}, {len(j.segments)} offline run(s) in "
            f"{j.segments[0].path.parent}: {len(todo)} to upload, {done} uploaded before")
    if j.running:
        text += "; the job is still running: its newest one is still being written, sync again when it ends"
    return text


def register(group: click.Group) -> None:
    group.add_command(sync_cmd)
