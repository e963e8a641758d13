"""hpclaunch export JOB"""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch import api
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option


@click.command("export", epilog=examples(
    "hpclaunch export 12345  # newest checkpoint -> RUN_DIR/export/step-<N>",
    "hpclaunch export 12345 --step 500 -o mixtral-step500"))
@click.argument("job", shell_complete=complete.job)
@click.option("--out", "-o", type=click.Path(path_type=Path), default=None,
              help="the folder to write (default: RUN_DIR/export/step-<N>)")
@click.option("--step", type=int, default=None, help="the checkpoint of this step (default: the newest)")
@click.option("--max-shard-size", default="5GB", show_default=True, help="largest safetensors file")
@json_option
def export_cmd(job: str, out: Path | None, step: int | None, max_shard_size: str, as_json: bool) -> None:
    """Write JOB's checkpoint as a Hugging Face model folder that `from_pretrained` loads.

    DeepSpeed checkpoints of every ZeRO stage are consolidated to fp32 (the login node needs 4 bytes per
    parameter of memory)."""
    exported = api.export(job, out, step, max_shard_size)
    done = exported.done
    if as_json:
        echo_json(exported)
    else:
        click.echo(f"exported step {done.step} of job {job} ({done.params / 1e6:.2f}M parameters) to {done.folder}")
        click.echo(f"  load it with from_pretrained({str(done.folder)!r})")


@click.command("export-run", epilog=examples(
    "hpclaunch export-run 12345                 # ./RUN.hpclaunch-run.tar.gz",
    "hpclaunch compare 12345 other-cluster.hpclaunch-run.tar.gz   # on the other cluster"))
@click.argument("job", shell_complete=complete.job)
@click.option("--out", "-o", type=click.Path(path_type=Path), default=Path("."), show_default=True,
              help="the archive file, or a folder to put RUN.hpclaunch-run.tar.gz in")
@json_option
def export_run_cmd(job: str, out: Path, as_json: bool) -> None:
    """Pack JOB's metrics, resolved config, provenance and timeline (no checkpoints) into a small archive that
    `hpclaunch compare` takes on another cluster, for a cross-cluster comparison (docs/recipes.md)."""
    done = api.export_run(job, out)
    path = done.archive
    if as_json:
        echo_json(done)
    else:
        click.echo(f"wrote {path} ({path.stat().st_size / 1024:.1f} KiB): "
                   f"`hpclaunch compare JOB {path.name}` compares a run with it")


def register(group: click.Group) -> None:
    group.add_command(export_cmd)
    group.add_command(export_run_cmd)
