"""hpclaunch recipes list|show"""

from __future__ import annotations

import click
import yaml

from hpclaunch.cli import complete
from hpclaunch.cli.options import WholeHelpGroup, echo_json, examples, json_option, say
from hpclaunch.cli.tables import print_table


@click.group("recipes", cls=WholeHelpGroup,
             epilog=examples("hpclaunch recipes list", "hpclaunch recipes show gpt2 --preset tiny"))
def recipes() -> None:
    """Recipes: list, show."""


@recipes.command("list", epilog=examples("hpclaunch recipes list", "hpclaunch recipes list --json"))
@json_option
def list_cmd(as_json: bool) -> None:
    """A table of the recipes found: name, launcher, task, presets, description."""
    from hpclaunch import api

    found = api.recipes()
    say(found.notes)
    if as_json:
        echo_json(found)
        return
    rows = [(r.name, "?", "?", "", f"INVALID: {r.error}") if r.error is not None else
            (r.name, r.launcher, r.task, ", ".join(r.presets), r.description) for r in found.items]
    print_table(["name", "launcher", "task", "presets", "description"], rows, ids=("name",),
                shrink=("presets", "description"))


@recipes.command("show", epilog=examples("hpclaunch recipes show gpt2", "hpclaunch recipes show gpt2 --preset tiny",
                                         "hpclaunch recipes show ./my_recipe --json"))
@click.argument("recipe", shell_complete=complete.recipe)
@click.option("--preset", shell_complete=complete.preset, help="show the recipe with this preset applied")
@json_option
def show_cmd(recipe: str, preset: str | None, as_json: bool) -> None:
    """The recipe with defaults filled in (and a preset applied), as YAML."""
    from hpclaunch import api

    shown = api.recipe(recipe, preset)
    if as_json:
        echo_json(shown)
        return
    click.echo(f"# {shown.file}" + (f" (preset {shown.preset})" if shown.preset else ""))
    click.echo(yaml.safe_dump(shown.data, sort_keys=False), nl=False)


def register(group: click.Group) -> None:
    group.add_command(recipes)
