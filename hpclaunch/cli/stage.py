"""hpclaunch stage-assets [RECIPE...] --profile P [--model REPO[@REV]] [--dataset REPO[:CONFIG][@REV]] ..."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hpclaunch.assets.requests import AssetRequest, merge, parse_dataset, parse_model, requests_for_spec
from hpclaunch.assets.stage import StageResult, endpoints_for, stage_many
from hpclaunch.assets.store import store_root
from hpclaunch.cli.options import json_option, profile_option
from hpclaunch.cli.tables import print_table
from hpclaunch.errors import AssetError

if TYPE_CHECKING:
    from rich.progress import TaskID


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class _Bars:
    """Rich progress bars on a terminal (bytes, rate, ETA per asset); nothing otherwise."""

    def __init__(self, enabled: bool):
        self.progress = None
        self.tasks: dict[AssetRequest, TaskID] = {}
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            console = Console(stderr=True)
            if console.is_terminal:
                self.progress = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    TimeRemainingColumn(),
                    console=console,
                )

    def __enter__(self) -> _Bars:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def event(self, req: AssetRequest, ev: dict) -> None:
        p = self.progress
        if p is None:
            if ev["event"] in ("retry", "endpoint_failed"):
                click.echo(
                    f"  {req.repo_id}: {ev['event']}: {ev.get('path', ev.get('endpoint'))}: "
                    f"{ev.get('error', ev.get('message'))}",
                    err=True,
                )
            return
        if ev["event"] == "plan":
            total = sum(f["size"] for f in ev["files"])
            if req in self.tasks:
                p.update(self.tasks[req], total=total, completed=ev["skipped_bytes"])
            else:
                self.tasks[req] = p.add_task(req.label, total=total, completed=ev["skipped_bytes"])
        elif ev["event"] == "progress" and req in self.tasks:
            p.advance(self.tasks[req], ev["bytes"])
        elif ev["event"] in ("retry", "endpoint_failed"):
            p.console.print(
                f"[yellow]{req.repo_id}: {ev.get('path', ev.get('endpoint'))}: "
                f"{ev.get('error', ev.get('message'))}"
            )


@click.command("stage-assets")
@click.argument("recipes", nargs=-1)
@profile_option
@click.option("--preset", help="recipe preset whose assets to stage (default: the recipe's default_preset)")
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
    from hpclaunch.config.loader import load_profile
    from hpclaunch.resolve import CliOverrides, resolve

    prof = load_profile(profile)
    wanted: list[AssetRequest] = []
    notes = []
    specs = []
    for recipe in recipes:
        spec = resolve(recipe, profile, CliOverrides(preset=preset))
        specs.append(spec)
        found = requests_for_spec(spec)
        if not found:
            notes.append(f"recipe {spec.recipe.name} (preset {spec.preset or 'none'}) needs no hub assets")
        wanted += found
    wanted += [parse_model(m) for m in models] + [parse_dataset(d) for d in datasets]
    wanted = merge(wanted)
    for note in notes:
        click.echo(f"hpclaunch: {note}", err=True)
    store = store_root(prof.assets.store)
    if not wanted:
        if notes:
            _prepare(specs if prepare else [], store, as_json)
            return
        raise click.UsageError("nothing to stage: give a RECIPE, --model or --dataset")
    urls = endpoints_for(endpoints, prof.assets.mirror, prof.assets.endpoints)
    t0 = time.monotonic()
    host = None
    if slurm_partition:
        from hpclaunch.assets.remote import stage_via_slurm
        from hpclaunch.paths import hpclaunch_home

        def submitted(job_id: str) -> None:
            if not as_json:
                click.echo(f"staging in Slurm job {job_id} on partition {slurm_partition}; waiting for it", err=True)

        results, errors, host = stage_via_slurm(
            wanted, store, urls, partition=slurm_partition, folder=hpclaunch_home() / "staging", workers=workers,
            verify=verify, timeout=timeout, on_submit=submitted)
    else:
        with _Bars(enabled=not as_json) as bars:
            results, errors = stage_many(wanted, store, urls, workers=workers, verify=verify, timeout=timeout,
                                         on_event=bars.event)
    wall = time.monotonic() - t0
    packed = None
    if pack_file is not None and not errors:
        from hpclaunch.assets.pack import pack

        packed = pack(store, [r.path for r in results], pack_file)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": str(store),
                    "host": host,
                    "endpoints": urls,
                    "seconds": round(wall, 3),
                    "assets": [r.to_json() for r in results],
                    "errors": errors,
                    "pack": str(pack_file) if packed is not None else None,
                },
                indent=1,
            )
        )
    else:
        _summary(results, wall, store)
        if packed is not None:
            click.echo(f"packed {len(results)} asset(s), {human(packed)} into {pack_file}")
    if errors:
        raise AssetError(
            errors[0] if len(errors) == 1 else f"{len(errors)} assets failed:\n" + "\n".join(errors)
        )
    _prepare(specs if prepare else [], store, as_json)


def _prepare(specs: list, store: Path, as_json: bool) -> None:
    """Tokenize and group each recipe's dataset into the store (--prepare), offline."""
    from hpclaunch.assets.prepare import prepare_data

    for spec in specs:
        if spec.recipe.dataset is None:
            continue
        done = prepare_data(spec, store)
        if as_json:
            click.echo(json.dumps({"prepared": done}))
        else:
            counts = ", ".join(f"{n} {split} blocks" for split, n in done["blocks"].items())
            click.echo(f"prepared {done['recipe']}: {counts} of {done['seq_len']} tokens ({done['seconds']:.1f} s)")


def _summary(results: list[StageResult], wall: float, store: Path) -> None:
    if not results:
        return
    rows = []
    for r in results:
        rate = f"{human(r.downloaded_bytes / r.seconds)}/s" if r.downloaded_bytes and r.seconds else ""
        rows.append(
            (
                r.request.label,
                r.status,
                r.files,
                human(r.bytes),
                f"{r.seconds:.1f}s",
                rate,
                r.endpoint or "",
                r.retries or "",
            )
        )
    print_table(["asset", "status", "files", "size", "time", "rate", "endpoint", "retries"], rows)
    staged = [r for r in results if r.status == "staged"]
    got = sum(r.downloaded_bytes for r in staged)
    click.echo(
        f"{len(staged)} staged, {len(results) - len(staged)} already complete; {human(got)} downloaded "
        f"in {wall:.1f}s; store {store}"
    )


def register(group: click.Group) -> None:
    group.add_command(stage_cmd)
