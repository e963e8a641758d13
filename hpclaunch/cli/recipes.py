"""hpclaunch recipes list|show"""

from __future__ import annotations

from typing import Any

import click
import yaml

from hpclaunch.cli import complete
from hpclaunch.cli.options import WholeHelpGroup, echo_json, examples, json_option
from hpclaunch.cli.tables import print_table
from hpclaunch.config.base import dump
from hpclaunch.config.loader import find_recipe, load_recipe_source, recipe_dirs
from hpclaunch.config.yamlfile import UnreadableFile, read_yaml
from hpclaunch.errors import HpclaunchError
from hpclaunch.submission.resolve import merge_recipe


@click.group("recipes", cls=WholeHelpGroup,
             epilog=examples("hpclaunch recipes list", "hpclaunch recipes show gpt2 --preset tiny"))
def recipes() -> None:
    """Recipes: list, show."""


@recipes.command("list", epilog=examples("hpclaunch recipes list", "hpclaunch recipes list --json"))
@json_option
def list_cmd(as_json: bool) -> None:
    """A table of the recipes found: name, launcher, task, presets, description."""
    found: list[dict[str, Any]] = []
    for name, folder in sorted(recipe_dirs().items()):
        try:
            data = read_yaml(folder / "recipe.yaml")
        except UnreadableFile as exc:
            click.echo(f"hpclaunch: warning: skipped {exc.message}", err=True)
            continue
        except HpclaunchError as exc:
            found.append({"name": name, "folder": str(folder), "error": exc.message})
            continue
        found.append({"name": name, "folder": str(folder), "launcher": data.get("launcher"), "task": data.get("task"),
                      "presets": [str(k) for k in presets] if isinstance(presets := data.get("presets"), dict) else [],
                      "description": str(data.get("description", ""))})
    if as_json:
        echo_json(found)
        return
    rows = [(r["name"], "?", "?", "", f"INVALID: {r['error']}") if "error" in r else
            (r["name"], r["launcher"], r["task"], ", ".join(r["presets"]), r["description"]) for r in found]
    print_table(["name", "launcher", "task", "presets", "description"], rows, ids=("name",),
                shrink=("presets", "description"))


@recipes.command("show", epilog=examples("hpclaunch recipes show gpt2", "hpclaunch recipes show gpt2 --preset tiny",
                                         "hpclaunch recipes show ./my_recipe --json"))
@click.argument("recipe", shell_complete=complete.recipe)
@click.option("--preset", shell_complete=complete.preset, help="show the recipe with this preset applied")
@json_option
def show_cmd(recipe: str, preset: str | None, as_json: bool) -> None:
    """The recipe with defaults filled in (and a preset applied), as YAML."""
    src = load_recipe_source(recipe)
    merged, chosen = merge_recipe(src, preset, ())
    if as_json:
        echo_json(dump(merged))
        return
    click.echo(f"# {find_recipe(recipe)}" + (f" (preset {chosen})" if chosen else ""))
    click.echo(yaml.safe_dump(dump(merged), sort_keys=False), nl=False)


def register(group: click.Group) -> None:
    group.add_command(recipes)
