"""hpclaunch stage-assets [RECIPE...] --profile P [--model REPO[@REV]] [--dataset REPO[:CONFIG][@REV]] ...

Parses the options, runs hpclaunch.assets.workflow and prints what it did."""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch.api import assets
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option, profile_option
from hpclaunch.cli.progress import Bars
from hpclaunch.cli.tables import human, print_table


@click.command("stage-assets", epilog=examples(
    "hpclaunch stage-assets recipes/gpt2 --profile guangzhou-a800",
    "hpclaunch stage-assets bert_large --profile guangzhou-a800 --pack assets.tar  # to copy over",
    "hpclaunch stage-assets --model gpt2 --profile guangzhou-a800"))
@click.argument("recipes", nargs=-1, shell_complete=complete.recipe)
@profile_option
@click.option("--preset", shell_complete=complete.preset,
              help="recipe preset whose assets to stage (default: the recipe's default_preset)")
@click.option(
    "--model", "models", multiple=True, metavar="REPO[@REV]", help="a hub model (config, weights, tokenizer)"
)
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    metavar="REPO[:CONFIG][@REV]",
    help="a hub dataset config (its parquet files)",
)
@click.option(
    "--endpoint",
    "endpoints",
    multiple=True,
    metavar="URL",
    help="hub endpoint, tried in order (default: the profile's assets.mirror, then assets.endpoints)",
)
@click.option(
    "--pack",
    "pack_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="also write the staged assets and their manifests to this tar file",
)
@click.option(
    "--workers", type=click.IntRange(1, 64), default=8, show_default=True, help="parallel file downloads"
)
@click.option(
    "--verify", is_flag=True, help="rehash assets already in the store instead of trusting size+mtime"
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.5, 600),
    default=10,
    show_default=True,
    help="seconds to wait for an endpoint to answer",
)
@click.option(
    "--slurm-partition",
    metavar="PARTITION",
    help="stage inside a Slurm job on this partition (one with internet access), through submitit, and wait",
)
@click.option(
    "--prepare",
    is_flag=True,
    help="also tokenize and group each RECIPE's dataset into the store, so its job starts training at once",
)
@json_option
def stage_cmd(
    recipes: tuple[str, ...],
    profile: str,
    preset: str | None,
    models: tuple[str, ...],
    datasets: tuple[str, ...],
    endpoints: tuple[str, ...],
    pack_file: Path | None,
    workers: int,
    verify: bool,
    timeout: float,
    slurm_partition: str | None,
    prepare: bool,
    as_json: bool,
) -> None:
    """Download the hub models, tokenizers and datasets that RECIPEs need into the profile's asset store.

    Each asset is assembled beside its final folder and renamed into place when complete, with a
    manifest of every file's size and sha256. A rerun skips what is complete and continues what a
    kill interrupted. Jobs then run offline from the store.
    """
    try:
        plan = assets.stage_plan(recipes, profile, preset=preset, models=models, datasets=datasets,
                                 endpoints=endpoints)
    except assets.NothingToStage as exc:
        raise click.UsageError(exc.message) from None
    for note in plan.notes:
        click.echo(f"hpclaunch: {note}", err=True)
    if plan.requests:
        def submitted(job_id: str) -> None:
            if not as_json:
                click.echo(f"staging in Slurm job {job_id} on partition {slurm_partition}; waiting for it", err=True)

        with Bars(enabled=not as_json and not slurm_partition) as bars:
            outcome = assets.stage(plan, workers=workers, verify=verify, timeout=timeout,
                                   slurm_partition=slurm_partition, pack_file=pack_file, on_event=bars.event,
                                   on_submit=submitted)
        if as_json:
            echo_json(outcome.to_json())
        else:
            _summary(outcome)
        outcome.check()
    if prepare:
        _prepare(plan, as_json)


def _prepare(plan: assets.StagePlan, as_json: bool) -> None:
    for done in assets.prepare_datasets(plan):
        if as_json:
            echo_json({"prepared": done})
        else:
            counts = ", ".join(f"{n} {split} blocks" for split, n in done["blocks"].items())
            click.echo(f"prepared {done['recipe']}: {counts} of {done['seq_len']} tokens ({done['seconds']:.1f} s)")


def _summary(outcome: assets.StageOutcome) -> None:
    if outcome.results:
        rows = []
        for r in outcome.results:
            rate = f"{human(r.downloaded_bytes / r.seconds)}/s" if r.downloaded_bytes and r.seconds else ""
            rows.append((r.request.label, r.status, r.files, human(r.bytes), f"{r.seconds:.1f}s", rate,
                         r.endpoint or "", r.retries or ""))
        print_table(["asset", "status", "files", "size", "time", "rate", "endpoint", "retries"], rows, ids=("asset",),
                    shrink=("endpoint",))
        click.echo(f"{len(outcome.staged)} staged, {len(outcome.skipped)} already complete; "
                   f"{human(outcome.downloaded_bytes)} downloaded in {outcome.seconds:.1f}s; "
                   f"store {outcome.plan.store}")
    if outcome.pack_file is not None:
        click.echo(f"packed {len(outcome.results)} asset(s), {human(outcome.packed_bytes or 0)} into "
                   f"{outcome.pack_file}")


def register(group: click.Group) -> None:
    group.add_command(stage_cmd)
