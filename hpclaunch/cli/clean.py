"""hpclaunch clean [--dry-runs] [--older-than AGE] [--yes | --dry-run] (hpclaunch/jobs/clean.py does the work)"""

from __future__ import annotations

import click

from hpclaunch.cli.options import echo_json, examples, json_option


def _age(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.0f}d" if days >= 1 else f"{seconds / 3600:.0f}h"


@click.command("clean", epilog=examples(
    "hpclaunch clean --dry-runs  # the run directories dry runs left",
    "hpclaunch clean --older-than 30d --dry-run  # list what would go",
    "hpclaunch clean --older-than 30d --yes"))
@click.option("--dry-runs", "dry_runs_only", is_flag=True, help="only the run directories of dry runs")
@click.option("--older-than", metavar="AGE", help="only those unchanged for AGE: 30d, 12h, 90m, 2w")
@click.option("--yes", "-y", is_flag=True, help="remove without asking")
@click.option("--dry-run", is_flag=True, help="list what would be removed; remove nothing")
@json_option
def clean_cmd(dry_runs_only: bool, older_than: str | None, yes: bool, dry_run: bool, as_json: bool) -> None:
    """Remove old run directories and their job records; never one of a job still queued or running.

    Give --dry-runs, --older-than or both. A run directory that no job record names is a dry run's (or a
    submit's stopped before it recorded the job); an orphan is one a submit stopped while writing it; both go
    with --dry-runs. One of recorded jobs goes only when the scheduler says they all ended."""
    from hpclaunch import api

    if not dry_runs_only and older_than is None:
        raise click.UsageError("say what to remove: --dry-runs, --older-than AGE, or both")
    found = api.clean_find(dry_runs_only=dry_runs_only, older_than=older_than)
    going = [d for d in found if d.keep is None]
    if going and not dry_run and not yes and as_json:
        raise click.UsageError("with --json, add --yes (remove) or --dry-run (list only)")
    if not as_json:
        for d in found:
            verb = f"keep ({d.keep})" if d.keep else ("would remove" if dry_run else "remove")
            click.echo(f"{verb}: {d.path} ({d.what}, {_age(d.age_s)} old)")
        if not found:
            click.echo("nothing to remove", err=True)
    if going and not dry_run and not yes:
        import sys

        if not sys.stdin.isatty():  # nobody to answer (a script, cron, CI): say what to do, remove nothing
            raise click.UsageError(f"{len(going)} run director{'y' if len(going) == 1 else 'ies'} would be removed, "
                                   "and there is no terminal to confirm it: add --yes (remove) or --dry-run (list)")
        click.confirm(f"remove {len(going)} run director{'y' if len(going) == 1 else 'ies'}?", abort=True)
    if not dry_run:
        api.clean_remove(going)
    if as_json:
        echo_json([{"run_dir": str(d.path), "job_ids": list(d.job_ids), "dry_run": d.dry_run,
                    "orphan": d.orphan, "age_s": round(d.age_s),
                    "removed": d.keep is None and not dry_run, "kept": d.keep} for d in found])


def register(group: click.Group) -> None:
    group.add_command(clean_cmd)
