"""hpclaunch recipes list|show"""

from __future__ import annotations

import click
import yaml

from hpclaunch.cli.tables import print_table
from hpclaunch.config.base import read_yaml
from hpclaunch.config.loader import find_recipe, load_recipe_source, recipe_dirs
from hpclaunch.errors import HpclaunchError
from hpclaunch.resolve import merge_recipe


@click.group("recipes")
def recipes() -> None:
    """Recipes: list, show."""


@recipes.command("list")
def list_cmd() -> None:
    """A table of the recipes found: name, launcher, task, presets, description."""
    rows: list[tuple[object, ...]] = []
    for name, folder in sorted(recipe_dirs().items()):
        try:
            data = read_yaml(folder / "recipe.yaml")
        except HpclaunchError as exc:
            rows.append((name, "?", "?", "", f"INVALID: {exc.message}"))
            continue
        rows.append((name, data.get("launcher"), data.get("task"), ", ".join(data.get("presets") or {}),
                     data.get("description", "")))
    print_table(["name", "launcher", "task", "presets", "description"], rows)


@recipes.command("show")
@click.argument("recipe")
@click.option("--preset", help="show the recipe with this preset applied")
def show_cmd(recipe: str, preset: str | None) -> None:
    """The recipe with defaults filled in (and a preset applied), as YAML."""
    src = load_recipe_source(recipe)
    merged, chosen = merge_recipe(src, preset, ())
    click.echo(f"# {find_recipe(recipe)}" + (f" (preset {chosen})" if chosen else ""))
    click.echo(yaml.safe_dump(merged.model_dump(mode="json"), sort_keys=False), nl=False)


def register(group: click.Group) -> None:
    group.add_command(recipes)
