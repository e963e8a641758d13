"""Resolve precedence: CLI flags > --set > preset > recipe > profile defaults > code defaults."""

from __future__ import annotations

import pytest

from hpclaunch.submission.resolve import CliOverrides, resolve

# Each case: (profile defaults, recipe keys, preset keys, --set items, CLI flags, expected value).
LAYOUT_CASES = [
    pytest.param({}, {}, None, (), {}, "1n1g", id="code-default"),
    pytest.param({"layout": "1n2g"}, {}, None, (), {}, "1n2g", id="profile-default"),
    pytest.param({"layout": "1n2g"}, {"layout": "2n4g"}, None, (), {}, "2n4g", id="recipe"),
    pytest.param({"layout": "1n2g"}, {"layout": "2n4g"}, {"layout": "3n2g"}, (), {}, "3n2g", id="preset"),
    pytest.param(
        {"layout": "1n2g"}, {"layout": "2n4g"}, {"layout": "3n2g"}, ("layout=4n1g",), {}, "4n1g", id="set"
    ),
    pytest.param(
        {"layout": "1n2g"},
        {"layout": "2n4g"},
        {"layout": "3n2g"},
        ("layout=4n1g",),
        {"layout": "2n8g"},
        "2n8g",
        id="cli-layout",
    ),
    pytest.param(
        {"layout": "1n2g"},
        {"layout": "2n4g"},
        {"layout": "3n2g"},
        ("layout=4n1g",),
        {"layout": "2n8g", "nodes": 3},
        "3n8g",
        id="cli-nodes-over-layout",
    ),
    pytest.param({}, {"layout": "2n4g"}, None, (), {"gpus_per_node": 1}, "2n1g", id="cli-gpus-over-recipe"),
]


def _resolve(write_profile, write_recipe, profile_defaults, recipe, preset, sets, cli, **profile_over):
    prof = write_profile(defaults=profile_defaults, **profile_over)
    if preset is not None:
        recipe = {**recipe, "presets": {"p": preset}}
    folder = write_recipe({"script": "train.py", "launcher": "torchrun", "task": "test", **recipe})
    return resolve(
        str(folder), str(prof), CliOverrides(preset="p" if preset is not None else None, sets=sets, **cli)
    )


@pytest.mark.parametrize("profile_defaults, recipe, preset, sets, cli, expected", LAYOUT_CASES)
def test_layout_precedence(
    write_profile, write_recipe, profile_defaults, recipe, preset, sets, cli, expected
):
    spec = _resolve(write_profile, write_recipe, profile_defaults, recipe, preset, sets, cli)
    assert spec.layout == expected
    nodes, gpus = (int(x) for x in expected.rstrip("g").split("n"))
    assert (spec.nodes, spec.gpus_per_node, spec.world_size) == (nodes, gpus, nodes * gpus)


TIME_CASES = [
    pytest.param({}, {}, None, (), {}, "01:00:00", id="code-default"),
    pytest.param({"time": "02:00:00"}, {}, None, (), {}, "02:00:00", id="profile-default"),
    pytest.param({"time": "02:00:00"}, {"time": "03:00:00"}, None, (), {}, "03:00:00", id="recipe"),
    pytest.param(
        {"time": "02:00:00"}, {"time": "03:00:00"}, {"time": "04:00"}, (), {}, "00:04:00", id="preset"
    ),
    pytest.param(
        {"time": "02:00:00"},
        {"time": "03:00:00"},
        {"time": "04:00"},
        ("time=1-00",),
        {},
        "1-00:00:00",
        id="set",
    ),
    pytest.param(
        {"time": "02:00:00"},
        {"time": "03:00:00"},
        {"time": "04:00"},
        ("time=1-00",),
        {"time": "90"},
        "01:30:00",
        id="cli",
    ),
]


@pytest.mark.parametrize("profile_defaults, recipe, preset, sets, cli, expected", TIME_CASES)
def test_time_precedence(write_profile, write_recipe, profile_defaults, recipe, preset, sets, cli, expected):
    assert _resolve(write_profile, write_recipe, profile_defaults, recipe, preset, sets, cli).time == expected


def test_code_default_time_is_capped_by_a_shorter_partition_limit(write_profile, write_recipe):
    spec = _resolve(write_profile, write_recipe, {}, {"partition": "short"}, None, (), {})
    assert spec.time == "00:30:00"


PARTITION_CASES = [
    pytest.param({}, None, (), {}, "gpu", id="profile-default_partition"),
    pytest.param({"partition": "short"}, None, (), {}, "short", id="recipe"),
    pytest.param({"partition": "short"}, {"partition": "gpu"}, (), {}, "gpu", id="preset"),
    pytest.param({"partition": "gpu"}, {"partition": "gpu"}, ("partition=short",), {}, "short", id="set"),
    pytest.param(
        {"partition": "short"},
        {"partition": "short"},
        ("partition=short",),
        {"partition": "gpu"},
        "gpu",
        id="cli",
    ),
]


@pytest.mark.parametrize("recipe, preset, sets, cli, expected", PARTITION_CASES)
def test_partition_precedence(write_profile, write_recipe, recipe, preset, sets, cli, expected):
    assert _resolve(write_profile, write_recipe, {}, recipe, preset, sets, cli).partition == expected


TRAIN_CASES = [
    pytest.param({}, None, (), 3e-4, 8, id="code-default"),
    pytest.param({"train": {"lr": 0.1, "micro_batch_size": 2}}, None, (), 0.1, 2, id="recipe"),
    pytest.param(
        {"train": {"lr": 0.1, "micro_batch_size": 2}},
        {"train": {"lr": 0.2}},
        (),
        0.2,
        2,
        id="preset-merges-deeply",
    ),
    pytest.param(
        {"train": {"lr": 0.1, "micro_batch_size": 2}},
        {"train": {"lr": 0.2}},
        ("train.lr=3e-2", "train.micro_batch_size=5"),
        0.03,
        5,
        id="set",
    ),
]


@pytest.mark.parametrize("recipe, preset, sets, lr, micro", TRAIN_CASES)
def test_train_value_precedence(write_profile, write_recipe, recipe, preset, sets, lr, micro):
    spec = _resolve(write_profile, write_recipe, {}, recipe, preset, sets, {})
    assert spec.recipe.train.lr == pytest.approx(lr)
    assert spec.recipe.train.micro_batch_size == micro


def test_default_preset_applies_unless_another_is_named(write_profile, write_recipe):
    prof = write_profile()
    folder = write_recipe(
        default_preset="a", presets={"a": {"train": {"lr": 0.5}}, "b": {"train": {"lr": 0.7}}}
    )
    assert resolve(str(folder), str(prof)).recipe.train.lr == 0.5
    assert resolve(str(folder), str(prof)).preset == "a"
    assert resolve(str(folder), str(prof), CliOverrides(preset="b")).recipe.train.lr == 0.7


def test_cli_name_overrides_recipe_name(write_profile, write_recipe):
    spec = resolve(str(write_recipe()), str(write_profile()), CliOverrides(name="my-run"))
    assert (spec.name, spec.recipe.name) == ("my-run", "testrecipe")


def test_jobspec_is_frozen_and_round_trips_through_yaml(write_profile, write_recipe, tmp_path):
    from hpclaunch.config.jobspec import is_jobspec_file, load_jobspec

    spec = resolve(
        str(write_recipe()), str(write_profile()), CliOverrides(layout="2n4g", sets=("train.lr=0.01",))
    )
    with pytest.raises(AttributeError):
        spec.nodes = 3  # type: ignore[misc]
    path = tmp_path / "resolved.yaml"
    path.write_text(spec.to_yaml())
    assert is_jobspec_file(str(path))
    assert load_jobspec(path) == spec


def test_a_launcher_outside_the_recipes_launchers_is_refused_where_it_was_given(write_profile, write_recipe, hpc_home):
    """`launchers:` lists what the script runs under; the launcher of the recipe file, of a preset or of --set must be
    among them, and the error names where it came from (not the model's top level)."""
    from hpclaunch.errors import ConfigError

    profile = str(write_profile())
    both = ["torchrun", "deepspeed"]
    folder = write_recipe(launcher="torchrun", launchers=both, presets={"ms": {"launcher": "msrun"}})
    with pytest.raises(ConfigError) as err:
        resolve(str(folder), profile)
    assert str(err.value) == (f"{folder}/recipe.yaml (presets.ms): launcher: recipe testrecipe's script runs under "
                              "torchrun or deepspeed (launchers in its recipe.yaml), not msrun: choose one of those, "
                              "or a recipe written for msrun (`hpclaunch recipes list`)")
    folder = write_recipe(launcher="torchrun", launchers=both, name="ok")
    assert resolve(str(folder), profile, CliOverrides(sets=("launcher=deepspeed",))).recipe.launcher == "deepspeed"
    with pytest.raises(ConfigError, match=r"^--set launcher=msrun: launcher: recipe ok's script runs under"):
        resolve(str(folder), profile, CliOverrides(sets=("launcher=msrun",)))
