"""hpclaunch plan RECIPE --profile P [--preset] [--layout] [--set k=v]... [--json]"""

from __future__ import annotations

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option, say, target_options


@click.command("plan", epilog=examples(
    "hpclaunch plan mixtral --profile guangzhou-a800 --preset full --layout 4n8g",
    "hpclaunch plan gpt2 -p guangzhou-a800 --set train.micro_batch_size=16 --json  # fits? see \"fits\"",
    "hpclaunch plan mixtral -p guangzhou-a800 --endpoint https://hf-mirror.com  # fetch the config from a mirror"))
@click.argument("recipe", shell_complete=complete.recipe)
@target_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="override a recipe key, e.g. "
              "train.micro_batch_size=4")
@click.option("--endpoint", "endpoints", multiple=True, metavar="URL",
              help="where to fetch the model's config.json when the store lacks it, tried in order (default: the "
                   "profile's assets.mirror, then assets.endpoints)")
@json_option
def plan_cmd(recipe: str, profile: str | None, preset: str | None, layout: str | None, nodes: int | None,
             gpus_per_node: int | None, partition: str | None, sets: tuple[str, ...], endpoints: tuple[str, ...],
             as_json: bool) -> None:
    """Memory per device of RECIPE on a profile's partition, before anything is queued.

    From the model's config alone (built on the meta device, offline): parameters, gradients and optimizer
    states by ZeRO stage, offload and precision; activations; buffers and a runtime reserve; the total against
    the partition's gpu_memory_gb; and, when it does not fit, the nearest settings that do. Resolved as
    `hpclaunch submit` resolves it (same flags). Exit 0 whether it fits or not (see `fits` in --json).

    A hub model's config.json that the store lacks is fetched alone (a few kB) into the store, marked config-only:
    the weights are still staged with `hpclaunch stage-assets` before a submit.
    """
    from hpclaunch import api

    planned = api.plan(recipe, profile, preset=preset, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node,
                       partition=partition, sets=sets, endpoints=endpoints)
    say(planned.notes)
    if as_json:
        echo_json(planned)
    else:
        click.echo("\n".join(planned.lines()))


def register(group: click.Group) -> None:
    group.add_command(plan_cmd)
