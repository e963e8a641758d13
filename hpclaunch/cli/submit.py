"""hpclaunch submit RECIPE|SCRIPT.py --profile P [--layout 2n8g | --nodes N --gpus-per-node G] [--set k=v]...
[-- SCRIPT_ARGS]"""

from __future__ import annotations

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, exclude_option, json_option, say, target_options


@click.command("submit", epilog=examples(
    "hpclaunch submit recipes/gpt2 --profile local --preset tiny --follow",
    "hpclaunch submit gpt2 --profile guangzhou-a800 --layout 2n8g --dry-run  # print the script only",
    "hpclaunch submit bert_large --profile guangzhou-a800 --set train.lr=3e-5",
    "hpclaunch submit gpt2 --profile dev-slurm --sweep train.lr=1e-4,3e-4 --max-parallel 1",
    "hpclaunch submit RUN_DIR/resolved.yaml  # again, exactly as it ran",
    "JOB=$(hpclaunch submit gpt2 --profile dev-slurm --parsable)",
    "hpclaunch submit train.py --profile local --layout 1n2g -- --steps 3  # your own script, its own args",
    "hpclaunch submit gpt2 --profile dev-slurm --exclude node3,node4  # never on these nodes",
    "hpclaunch submit gpt2 --profile dev-slurm-ssh --preset tiny  # from a laptop, over SSH (docs/remote.md)"))
@click.argument("recipe", shell_complete=complete.recipe)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--launcher", metavar="torchrun|deepspeed", default=None,
              help="with a SCRIPT.py: the launcher that runs it (default: torchrun)")
@target_options
@click.option("--time", "time_", metavar="TIME", help="time limit, e.g. 04:00:00 or 1-00:00:00")
@click.option("--name", help="job name (default: the recipe name)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="override a recipe key, e.g. train.lr=3e-4")
@click.option("--dry-run", is_flag=True, help="write the run directory and print the script; submit nothing")
@click.option("--follow", "-f", is_flag=True, help="wait for the job and stream its output")
@click.option("--retries", type=click.IntRange(0, 100), default=0, show_default=True,
              help="resubmit after a node-level failure (node fail, OOM kill, device error, hang), from the last "
                   "checkpoint, with the suspect node excluded")
@click.option("--spare-nodes", type=click.IntRange(0), default=None, metavar="K",
              help="ask for K more nodes that idle until a node is lost or faulty, then take its place when the "
                   "step is relaunched in the allocation (restarts.max), at the same world size")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=V1,V2,...",
              help="run one job per value (per combination, when given for several keys) as one job array, "
                   "e.g. train.lr=1e-4,3e-4")
@click.option("--max-parallel", type=click.IntRange(1), default=None, metavar="K",
              help="with --sweep: run at most K elements at a time (default: all)")
@click.option("--skip-fit-check", is_flag=True,
              help="queue it even when the memory plan says it does not fit its devices (docs/plan.md)")
@click.option("--parsable", is_flag=True, help="print only the job id (a sweep's: the array's id), as sbatch "
              "--parsable does")
@click.option("--after", "after", multiple=True, metavar="JOB[:ok|any|notok]",
              help="start only once job (or sweep) JOB completed (ok, the default), ended in any state (any) or "
                   "failed (notok); Slurm only")
@click.option("--sbatch", "sbatch", multiple=True, metavar="KEY=VALUE",
              help="one more #SBATCH option, e.g. mem=64G or exclusive (over the profile's sbatch_extra); Slurm only")
@click.option("--notify", default=None, metavar="URL|COMMAND",
              help="word when the job ends: POST its end as JSON to an http(s):// URL, or run a shell command with "
                   "that JSON on stdin (over notify: of the profile and recipe; docs/profiles.md#word-when-a-job-ends)")
@click.option("--remote", "remote", default=None, metavar="USER@HOST[:PORT]",
              help="submit from here to this login node over SSH (over the profile's remote:; docs/remote.md)")
@exclude_option
@json_option
def submit_cmd(recipe: str, profile: str | None, preset: str | None, layout: str | None, nodes: int | None,
               gpus_per_node: int | None, partition: str | None, time_: str | None, name: str | None,
               sets: tuple[str, ...], dry_run: bool, follow: bool, retries: int, sweeps: tuple[str, ...],
               max_parallel: int | None, skip_fit_check: bool, parsable: bool, after: tuple[str, ...],
               sbatch: tuple[str, ...], exclude: tuple[str, ...], as_json: bool, script_args: tuple[str, ...],
               launcher: str | None, spare_nodes: int | None, remote: str | None, notify: str | None) -> None:
    """Resolve RECIPE on a cluster profile, render the job script and submit it.

    RECIPE is a recipe folder (recipes/gpt2), a bundled recipe name (gpt2), or a resolved.yaml from an
    earlier run directory, which is submitted again exactly as it was resolved. With --sweep, every
    combination of the values is resolved as with --set and runs as one element of a job array.

    RECIPE may also be your own Python script (train.py): it runs under --launcher as an ad-hoc recipe.
    SCRIPT_ARGS after `--` go to the script as they are (they replace the recipe's `args`).
    """
    from hpclaunch import api

    cli = api.asked(preset=preset, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, partition=partition,
                    time=time_, name=name, sets=sets, retries=retries, sbatch=sbatch, launcher=launcher,
                    script_args=script_args or None, exclude=exclude, spare_nodes=spare_nodes, notify=notify)
    if parsable and (dry_run or as_json):
        raise click.UsageError("--parsable prints the id of the job queued: not with "
                               + ("--dry-run (nothing is queued)" if dry_run else "JSON output"))
    job = api.submit_request(recipe, profile, cli, sweeps, max_parallel, dry_run=dry_run, after=after,
                         skip_fit_check=skip_fit_check, remote=remote)
    say(job.notes)
    waits = ", ".join(after)
    if job.sweep is not None:
        from hpclaunch.cli.sweeps import print_sweep

        print_sweep(job, dry_run=dry_run, follow=follow, as_json=as_json, parsable=parsable, waits=waits)
        return
    spec = job.spec
    assert spec is not None  # submitted in this process
    if parsable:
        click.echo(job.job_id)
    elif as_json:
        echo_json(job)
    elif dry_run:
        click.echo(job.script.read_text(encoding="utf-8"), nl=False)
        click.echo(f"# dry run: nothing submitted; run directory {job.run_dir}", err=True)
    else:
        click.echo(f"submitted job {job.job_id} ({spec.recipe.name} on {spec.profile.name}, {spec.layout})"
                   + (f", waiting for {waits}" if waits else ""))
        click.echo(f"run directory: {job.run_dir}")
    if follow and job.job_id is not None:
        from hpclaunch.cli.follow import follow_to_end  # only when following: keeps the dry-run light

        follow_to_end(job.job_id, job.run_dir)


def register(group: click.Group) -> None:
    group.add_command(submit_cmd)
