"""Each validation error's exact message: what is wrong, where (file, dotted key) and what to do."""

from __future__ import annotations

import pytest

from hpclaunch.config.loader import load_profile
from hpclaunch.config.profile import Partition, Profile
from hpclaunch.config.recipe import TrainSpec
from hpclaunch.errors import ConfigError, LimitError, NotFoundError
from hpclaunch.submission.resolve import CliOverrides, parse_set, resolve

# The valid keys are listed sorted; computed from the models so that new fields do not break the tests.
PARTITION_KEYS = ", ".join(sorted(Partition.__struct_fields__))
PROFILE_KEYS = ", ".join(sorted(Profile.__struct_fields__))
TRAIN_KEYS = ", ".join(sorted(TrainSpec.__struct_fields__))


def test_valid_key_lists_hold_the_documented_fields():
    assert "gpu_type, gpus_per_node, gres, max_nodes, max_time" in PARTITION_KEYS
    assert "lr, max_steps, micro_batch_size" in TRAIN_KEYS


def test_unknown_key_in_profile(write_profile, base_profile):
    data = {
        **base_profile,
        "partitions": {"gpu": {"gpus_per_node": 8, "cpus_per_node": 4, "gpu_tyep": "A800"}},
    }
    path = write_profile(data)
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value) == f"{path}: partitions.gpu.gpu_tyep: unknown key; valid keys: {PARTITION_KEYS}"


def test_unknown_top_level_key_in_profile(write_profile):
    path = write_profile(modulez={"load": ["cuda"]})
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value) == f"{path}: modulez: unknown key; valid keys: {PROFILE_KEYS}"


def test_unknown_key_in_recipe(write_profile, write_recipe):
    folder = write_recipe(train={"lrr": 0.1})
    with pytest.raises(ConfigError) as exc:
        resolve(str(folder), str(write_profile()))
    assert str(exc.value) == f"{folder / 'recipe.yaml'}: train.lrr: unknown key; valid keys: {TRAIN_KEYS}"


def test_unknown_key_in_a_preset_names_the_preset(write_profile, write_recipe):
    folder = write_recipe(presets={"tiny": {"train": {"lrr": 0.1}}})
    with pytest.raises(ConfigError) as exc:
        resolve(str(folder), str(write_profile()), CliOverrides(preset="tiny"))
    assert str(exc.value) == (
        f"{folder / 'recipe.yaml'} (presets.tiny): train.lrr: unknown key; valid keys: {TRAIN_KEYS}"
    )


def test_unknown_key_from_set_names_the_flag(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(sets=("train.lrr=1",)))
    assert str(exc.value) == f"--set train.lrr=1: train.lrr: unknown key; valid keys: {TRAIN_KEYS}"


def test_wrong_type_in_recipe(write_profile, write_recipe):
    folder = write_recipe(train={"micro_batch_size": "eight"})
    with pytest.raises(ConfigError) as exc:
        resolve(str(folder), str(write_profile()))
    assert str(exc.value) == (
        f"{folder / 'recipe.yaml'}: train.micro_batch_size: Input should be a valid "
        "integer, unable to parse string as an integer (got 'eight')"
    )


def test_wrong_type_in_profile(write_profile, base_profile):
    data = {**base_profile, "partitions": {"gpu": {"gpus_per_node": "many", "cpus_per_node": 4}}}
    path = write_profile(data)
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value) == (
        f"{path}: partitions.gpu.gpus_per_node: Input should be a valid integer, "
        "unable to parse string as an integer (got 'many')"
    )


def test_wrong_type_from_set(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(sets=("train.lr=fast",)))
    assert str(exc.value) == (
        "--set train.lr=fast: train.lr: Input should be a valid number, unable to parse "
        "string as a number (got 'fast')"
    )


def test_missing_required_key(write_profile, base_profile):
    data = {k: v for k, v in base_profile.items() if k != "accelerator"}
    path = write_profile(data)
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value) == f"{path}: accelerator: required key is missing"


def test_every_problem_is_listed_at_once(write_profile, base_profile):
    """Not only the first: each missing key, failed check, wrong type, check across keys and unknown key, inside
    nested sections too, with its place and value (five at most, then how many more)."""
    data = {**base_profile, "modulez": {}, "python": {"conda_env": "a", "venv": "b"},
            "partitions": {"gpu": {"gpus_per_node": 80, "cpus_per_node": "all"}}}
    del data["accelerator"]
    path = write_profile(data)
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value).splitlines() == [
        f"{path}: accelerator: required key is missing",
        f"{path}: partitions.gpu.gpus_per_node: 80 devices per node is more than any node has (at most 64; 8 is "
        "usual): a typo? (got 80)",
        f"{path}: partitions.gpu.cpus_per_node: Input should be a valid integer, unable to parse string as an "
        "integer (got 'all')",
        f"{path}: python: set either conda_env or venv, not both",
        f"{path}: modulez: unknown key; valid keys: {PROFILE_KEYS}",
    ]
    data["collective_timeout"] = "soon"
    with pytest.raises(ConfigError) as exc:
        load_profile(str(write_profile(data)))
    assert str(exc.value).splitlines()[-1] == "... and 1 more"


def test_backend_that_does_not_fit_the_accelerator(write_profile):
    path = write_profile(accelerator="npu", backend="nccl")
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value) == (
        f"{path}: (top level): backend 'nccl' does not run on accelerator 'npu'; use one of: hccl"
    )


def test_invalid_yaml_names_file_and_line(write_profile):
    path = write_profile()
    path.write_text("scheduler: slurm\npartitions: [a\n")
    with pytest.raises(ConfigError) as exc:
        load_profile(str(path))
    assert str(exc.value).startswith(f"{path}: invalid YAML at line 3")


@pytest.mark.parametrize(
    "layout, message",
    [
        ("5n8g", "layout 5n8g asks for 5 nodes, but partition 'gpu' of profile 'testprof' allows at most 4"),
        (
            "1n9g",
            "layout 1n9g asks for 9 GPUs per node, but partition 'gpu' of profile 'testprof' has 8 per node",
        ),
    ],
)
def test_layout_larger_than_the_partition(write_profile, write_recipe, layout, message):
    with pytest.raises(LimitError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(layout=layout))
    assert str(exc.value) == message


def test_time_over_the_partition_limit(write_profile, write_recipe):
    with pytest.raises(LimitError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(partition="short", time="01:00:00"))
    assert str(exc.value) == (
        "time 01:00:00 (--time) exceeds the limit of partition 'short' in profile "
        "'testprof': 00:30:00\n  hint: ask for --time 00:30:00 or less"
    )


def test_time_over_the_limit_from_the_recipe_names_the_recipe(write_profile, write_recipe):
    with pytest.raises(
        LimitError,
        match=r"^time 3-00:00:00 \(recipe testrecipe time\) exceeds the limit of "
        r"partition 'gpu' in profile 'testprof': 2-00:00:00",
    ):
        resolve(str(write_recipe(time="3-00:00:00")), str(write_profile()))


def test_bad_time_string(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(time="soon"))
    assert str(exc.value) == "--time: not a Slurm time: 'soon' (use MM, HH:MM:SS or D-HH:MM:SS)"


def test_unknown_profile_lists_the_available_ones(hpc_home):
    with pytest.raises(NotFoundError) as exc:
        load_profile("nope")
    assert str(exc.value) == (
        "unknown profile 'nope'; available: ascend-910, cngrid12-v100, dev-slurm, dev-slurm-26, dev-slurm-26-rest, "
        "dev-slurm-container, dev-slurm-rest, dev-slurm-ssh, guangzhou-a800, local, local-cuda, musa-s4000\n"
        "  hint: add your own as ~/.config/hpclaunch/cluster_profiles/NAME.yaml"
    )


def test_unknown_preset(write_profile, write_recipe):
    folder = write_recipe(presets={"tiny": {}, "full": {}})
    with pytest.raises(NotFoundError) as exc:
        resolve(str(folder), str(write_profile()), CliOverrides(preset="huge"))
    assert str(exc.value) == (
        f"unknown preset 'huge'; available: full, tiny\n  hint: recipe 'testrecipe' "
        f"defines its presets under `presets:` in {folder / 'recipe.yaml'}"
    )


def test_unknown_partition(write_profile, write_recipe):
    with pytest.raises(NotFoundError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(partition="bigmem"))
    assert str(exc.value).startswith("unknown partition 'bigmem'; available: gpu, short\n")


@pytest.mark.parametrize(
    "item, message",
    [
        ("train.lr", "--set 'train.lr': expected KEY=VALUE, e.g. --set train.lr=3e-4"),
        ("=3", "--set '=3': '' is not a dotted key such as train.lr"),
        ("train lr=3", "--set 'train lr=3': 'train lr' is not a dotted key such as train.lr"),
        ("train..lr=3", "--set 'train..lr=3': 'train..lr' is not a dotted key such as train.lr"),
    ],
)
def test_bad_set_syntax(item, message):
    with pytest.raises(ConfigError) as exc:
        parse_set(item)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "item, path, value",
    [
        ("train.lr=3e-4", ["train", "lr"], 3e-4),
        ("train.max_steps=10", ["train", "max_steps"], 10),
        ("args=[--a, b]", ["args"], ["--a", "b"]),
        ("name=a=b", ["name"], "a=b"),
        ("env.X=", ["env", "X"], ""),
        ("env.X=[unclosed", ["env", "X"], "[unclosed"),
    ],
)
def test_set_values_are_yaml_scalars(item, path, value):
    assert parse_set(item) == (path, value)


def test_bad_job_name(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(name="a b"))
    assert str(exc.value) == "name: job name 'a b' may hold only letters, digits and _ . + -"


@pytest.mark.parametrize("time", ["0", "00:00:00", "0-00"])
def test_zero_time_is_refused(write_profile, write_recipe, time):
    # Slurm takes a zero time limit as "no limit", which would slip past the partition's limit
    with pytest.raises(ConfigError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(time=time))
    assert str(exc.value) == f"--time: time {time!r} is zero; ask for at least one minute"


def test_a_set_value_is_named_as_the_origin_of_a_bad_layout(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        resolve(str(write_recipe()), str(write_profile()), CliOverrides(sets=("layout=abc",)))
    assert str(exc.value) == "--set layout=abc: invalid layout 'abc': write NODESnGPUSg, e.g. 1n1g or 2n8g"


def test_unquoted_yaml_times_and_exponents(write_profile, write_recipe, tmp_path):
    """`time: 12:00:00` is not the base-60 integer 43200 and `lr: 3e-4` is a float, in files and --set."""
    folder = write_recipe()
    (folder / "recipe.yaml").write_text(
        "script: train.py\nlauncher: torchrun\ntime: 12:00:00\ntrain: {lr: 3e-4}\n"
        "presets: {short: {time: 90}}\n"
    )
    spec = resolve(str(folder), str(write_profile()))
    assert (spec.time, spec.recipe.time, spec.recipe.train.lr) == ("12:00:00", "12:00:00", 3e-4)
    assert resolve(str(folder), str(write_profile()), CliOverrides(preset="short")).time == "01:30:00"
    spec = resolve(str(folder), str(write_profile()), CliOverrides(sets=("time=4:00:00", "train.lr=1e-3")))
    assert (spec.time, spec.recipe.train.lr) == ("04:00:00", 1e-3)
