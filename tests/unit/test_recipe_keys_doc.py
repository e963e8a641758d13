"""docs/recipes.md lists every recipe key with its description, as scripts/recipe_keys.py reads them off the
models: a key added to hpclaunch/config/recipe.py without `python scripts/recipe_keys.py --write`
(or without a description) fails here."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


recipe_keys = load_script("recipe_keys")


def test_the_doc_table_is_the_generated_one():
    doc = (REPO / "docs" / "recipes.md").read_text(encoding="utf-8")
    block = doc.split(recipe_keys.BEGIN + "\n", 1)[1].split(recipe_keys.END, 1)[0]
    assert block == recipe_keys.table(), "docs/recipes.md is stale: run python scripts/recipe_keys.py --write"


def test_every_key_of_every_section_is_listed_with_a_description():
    from hpclaunch.config.recipe import Recipe, TrainSpec

    keys = {key: what for key, _, _, what in recipe_keys.rows()}
    assert {f"train.{name}" for name in TrainSpec.__struct_fields__} <= keys.keys()
    assert set(Recipe.__struct_fields__) | {"presets", "default_preset"} <= keys.keys()
    assert {"model.repo", "deepspeed.zero_stage", "msrun.master_port", "watchdog.timeout", "adhoc"} <= keys.keys()
    undescribed = sorted(key for key, what in keys.items() if not what.strip())
    assert not undescribed, f"give these fields a description= in hpclaunch/config/recipe.py: {undescribed}"
