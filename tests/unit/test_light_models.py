"""The light records (hpclaunch/config/light.py) against the pydantic models they stand in for.

For any input, the light check either raises Unsure (pydantic decides) or gives what pydantic gives,
field for field; it never accepts what pydantic rejects. And its field table is the models' own.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.config import light, light_gen
from hpclaunch.config.light_schema import MODELS
from hpclaunch.config.loader import profile_files, read_profile, recipe_dirs
from hpclaunch.errors import HpclaunchError
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy


def test_the_field_table_is_generated_from_the_current_models():
    assert light_gen.OUT.read_text(encoding="utf-8") == light_gen.source(), (
        "hpclaunch/config/light_schema.py is out of date: run `python -m hpclaunch.config.light_gen`"
    )


def test_every_validator_of_the_models_has_its_rule():
    unknown = [name for name, known in light.all_rules_known().items() if not known]
    assert not unknown, f"add the rules of these models' validators to hpclaunch/config/light.py: {unknown}"


def _pydantic(model: str) -> Any:
    return {m.__name__: m for m in light_gen.models()}[model]


def _same(model: str, data: Any) -> None:
    """light and pydantic agree on `data` (or light leaves it to pydantic)."""
    from pydantic import ValidationError

    try:
        expected = _pydantic(model).model_validate(copy.deepcopy(data))
    except ValidationError:
        expected = None
    try:
        got = light.validate(model, copy.deepcopy(data))
    except light.Unsure:
        return
    assert expected is not None, f"light accepted what pydantic rejects: {model} {data!r}"
    assert got.model_dump() == expected.model_dump(), data
    assert got.model_dump(mode="json") == expected.model_dump(mode="json"), data
    assert [type(v) for v in got.model_dump().values()] == [type(v) for v in expected.model_dump().values()]


ODD_VALUES = [None, True, False, 0, 1, -1, 2, 7, 1.0, 0.5, -0.5, 1.5, 1e-3, math.inf, math.nan, "", "x", "3", "1e-3",
              "04:00:00", "90", "true", "null", "gloo", "bpe", [], [1], ["a"], ["a", 1], [0.9, 0.95], (1, 2), {},
              {"a": 1}, {"a": "b"}, {1: "a"}, {"a": None}, {"a": [1, {"b": 2.0}]}]


def _base(model: str) -> dict[str, Any]:
    path, data = read_profile("guangzhou-a800")
    if model == "Profile":
        return data
    if model == "Partition":
        return data["partitions"]["gpu"]
    if model == "Recipe":
        return {"name": "r", "script": "train.py", "launcher": "deepspeed", "model": {"repo": "gpt2"},
                "dataset": {"repo": "d"}, "train": {"lr": 1e-4}, "deepspeed": {"zero_stage": 3}}
    return {}


@pytest.mark.parametrize("model", ["Profile", "Partition", "Recipe", "TrainSpec", "ModelSpec", "DatasetSpec",
                                   "TokenizerSpec", "DeepSpeedSpec", "ParallelSpec", "MsrunSpec", "PythonEnv",
                                   "Modules", "AssetConfig", "ProfileDefaults"])
def test_light_never_disagrees_with_pydantic(model):
    base = _base(model)
    _same(model, base)
    if model not in ("ModelSpec", "DatasetSpec"):  # these need a repo: {} is invalid
        assert light.validate(model, copy.deepcopy(base)) is not None  # the light path really checks
    fields = [f[0] for f in MODELS[model]["fields"]] + ["unknown_key"]
    for field in fields:
        for value in ODD_VALUES:
            _same(model, {**base, field: value})
        if field in base:
            _same(model, {k: v for k, v in base.items() if k != field})


def _cases() -> list[tuple[str, str, str | None, str | None]]:
    from hpclaunch.config.loader import load_recipe_source

    cases = []
    for recipe in sorted(recipe_dirs()):
        presets = [None, *sorted(load_recipe_source(recipe).data.get("presets") or {})]
        for profile in sorted(profile_files()):
            for preset in presets:
                for layout in (None, "1n1g", "2n8g"):
                    cases.append((recipe, profile, preset, layout))
    return cases


def test_every_bundled_recipe_resolves_and_renders_the_same_both_ways(hpc_home, monkeypatch):
    from hpclaunch.submission.render import render

    monkeypatch.delenv("HPCLAUNCH_PATH")  # the bundled recipes and profiles only
    run_dir = Path("/runs/light")
    cases = _cases()
    assert len(cases) > 50
    fast = 0
    for recipe, profile, preset, layout in cases:
        cli = CliOverrides(preset=preset, layout=layout)
        try:
            expected = resolve(recipe, profile, cli)
        except HpclaunchError as exc:
            with pytest.raises(type(exc)) as got:
                resolve(recipe, profile, cli, light=True)
            assert str(got.value) == str(exc)
            continue
        spec = resolve(recipe, profile, cli, light=True)
        fast += type(spec).__module__ == "hpclaunch.config.light"
        assert spec.model_dump(mode="json") == expected.model_dump(mode="json")
        assert spec.to_yaml() == expected.to_yaml()
        assert (spec.layout, spec.world_size, spec.python_env.model_dump(), spec.script_path) == (
            expected.layout, expected.world_size, expected.python_env.model_dump(), expected.script_path)
        assert spec.profile.visible_devices_var == expected.profile.visible_devices_var
        assert render(with_recipe_copy(spec, run_dir), run_dir) == render(with_recipe_copy(expected, run_dir), run_dir)
    assert fast > 20  # the light path really ran


def test_a_bad_config_gives_the_pydantic_message(write_profile, write_recipe):
    folder = write_recipe(train={"lr": "fast", "micro_batch_siz": 2})
    for light_path in (False, True):
        with pytest.raises(HpclaunchError) as exc:
            resolve(str(folder), str(write_profile()), light=light_path)
        assert "train.micro_batch_siz: unknown key; valid keys: " in str(exc.value)
        assert "train.lr: Input should be a valid number" in str(exc.value)


def test_records_are_frozen_and_copy_like_models():
    spec = resolve("gpt2", "guangzhou-a800", CliOverrides(layout="2n8g"), light=True)
    with pytest.raises(TypeError):
        spec.name = "x"  # type: ignore[misc]
    moved = spec.model_copy(update={"recipe_dir": "/elsewhere"})
    assert moved.recipe_dir == "/elsewhere" and spec.recipe_dir != "/elsewhere"
    assert moved.recipe is spec.recipe
