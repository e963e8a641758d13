"""LiBai layout notation and batch arithmetic: global = micro x grad-accum x data-parallel."""

from __future__ import annotations

import pytest

from hpclaunch.config.layout import Layout, parse_layout
from hpclaunch.errors import ConfigError
from hpclaunch.submission.resolve import CliOverrides, resolve


@pytest.mark.parametrize(
    "text, nodes, gpus", [("1n1g", 1, 1), ("2n8g", 2, 8), ("16n4g", 16, 4), ("2N8G", 2, 8), (" 1n2g ", 1, 2)]
)
def test_parse_layout(text, nodes, gpus):
    layout = parse_layout(text)
    assert layout == Layout(nodes, gpus)
    assert layout.world_size == nodes * gpus
    assert str(layout) == f"{nodes}n{gpus}g"


@pytest.mark.parametrize("text", ["", "2", "2n", "n8g", "2g8n", "2x8", "-1n2g", "1.5n2g", "2n8g1"])
def test_parse_layout_rejects(text):
    with pytest.raises(ConfigError) as exc:
        parse_layout(text, where="--layout")
    assert str(exc.value) == f"--layout: invalid layout {text!r}: write NODESnGPUSg, e.g. 1n1g or 2n8g"


@pytest.mark.parametrize("text", ["0n8g", "2n0g"])
def test_parse_layout_rejects_zero(text):
    with pytest.raises(ConfigError, match="nodes and GPUs per node must be at least 1"):
        parse_layout(text)


def _spec(write_profile, write_recipe, layout, train=None, parallel=None):
    recipe = {"train": train or {}}
    if parallel is not None:
        recipe.update(launcher="msrun", parallel=parallel)
    folder = write_recipe(**recipe)
    return resolve(str(folder), str(write_profile()), CliOverrides(layout=layout))


@pytest.mark.parametrize(
    "layout, train, dp, accum, global_batch",
    [
        ("1n1g", {"micro_batch_size": 4}, 1, 1, 4),  # nothing given: accum 1
        ("2n8g", {"micro_batch_size": 4, "grad_accum": 2}, 16, 2, 128),  # global derived
        ("2n8g", {"micro_batch_size": 4, "global_batch_size": 256}, 16, 4, 256),  # accum derived
        (
            "1n4g",
            {"micro_batch_size": 2, "grad_accum": 3, "global_batch_size": 24},
            4,
            3,
            24,
        ),  # all three agree
    ],
)
def test_batch_arithmetic(write_profile, write_recipe, layout, train, dp, accum, global_batch):
    spec = _spec(write_profile, write_recipe, layout, train)
    assert (spec.data_parallel, spec.grad_accum, spec.global_batch_size) == (dp, accum, global_batch)
    assert spec.global_batch_size == spec.recipe.train.micro_batch_size * spec.grad_accum * spec.data_parallel


def test_batch_not_a_multiple_names_the_numbers(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        _spec(write_profile, write_recipe, "1n4g", {"micro_batch_size": 3, "global_batch_size": 10})
    assert str(exc.value) == (
        "train.global_batch_size: global_batch_size(10) is not a multiple of micro_batch_size(3) x "
        "data_parallel(4) = 12\n"
        "  hint: change train.global_batch_size or train.micro_batch_size, or the layout"
    )


def test_batch_mismatch_names_the_numbers(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        _spec(
            write_profile,
            write_recipe,
            "2n4g",
            {"micro_batch_size": 2, "grad_accum": 2, "global_batch_size": 64},
        )
    assert str(exc.value) == (
        "train.global_batch_size: global_batch_size(64) != micro_batch_size(2) x grad_accum(2) x "
        "data_parallel(8) = 32\n  hint: drop one of train.grad_accum / train.global_batch_size and it is "
        "derived from the other"
    )


def test_model_and_pipeline_parallel_shrink_data_parallel(write_profile, write_recipe):
    spec = _spec(
        write_profile,
        write_recipe,
        "2n4g",
        {"micro_batch_size": 1, "grad_accum": 2},
        {"model_parallel": 2, "pipeline_stage": 2, "micro_batch_num": 2, "implemented": ["data", "model", "pipeline"]},
    )
    assert (spec.data_parallel, spec.global_batch_size) == (2, 4)


def test_parallel_sizes_must_multiply_to_the_world_size(write_profile, write_recipe):
    with pytest.raises(ConfigError) as exc:
        _spec(write_profile, write_recipe, "1n8g", None, {"data_parallel": 2, "model_parallel": 2})
    # the first line is the problem with its numbers; a hint may follow
    assert str(exc.value).splitlines()[0] == (
        "parallel: data_parallel(2) x model_parallel(2) x pipeline_stage(1) = 4, but the layout has 8 devices"
    )
    with pytest.raises(ConfigError, match=r"model_parallel\(4\) x pipeline_stage\(1\) = 4 .* 6 devices"):
        _spec(write_profile, write_recipe, "2n3g", None, {"model_parallel": 4})
