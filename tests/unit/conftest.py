"""Factories for unit tests: a profile file and a recipe folder written into tmp_path. The `floors` marker: which
unit tests scripts/test-floors.sh runs at the lowest versions (tests/unit/floors.py says which and why)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.floors import is_floors_module

# A Slurm profile with two partitions and profile defaults, for precedence and limit tests.
BASE_PROFILE: dict[str, Any] = {
    "description": "unit-test cluster",
    "scheduler": "slurm",
    "accelerator": "cuda",
    "backend": "nccl",
    "default_partition": "gpu",
    "partitions": {
        "gpu": {"gpus_per_node": 8, "cpus_per_node": 16, "max_time": "2-00:00:00", "max_nodes": 4},
        "short": {"gpus_per_node": 4, "cpus_per_node": 8, "max_time": "00:30:00", "max_nodes": 2},
    },
}

BASE_RECIPE: dict[str, Any] = {"script": "train.py", "launcher": "torchrun", "task": "test"}
UNIT = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before `-m floors` selects by the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().parent == UNIT and is_floors_module(item.path):
            item.add_marker(pytest.mark.floors)


@pytest.fixture
def base_profile() -> dict[str, Any]:
    return copy.deepcopy(BASE_PROFILE)


@pytest.fixture
def write_profile(tmp_path: Path) -> Callable[..., Path]:
    def write(data: dict[str, Any] | None = None, name: str = "testprof", **over: Any) -> Path:
        content = copy.deepcopy(BASE_PROFILE if data is None else data)
        content.update(over)
        path = tmp_path / "profiles" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(content, sort_keys=False))
        return path

    return write


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An asset store (empty: not created) in tmp_path."""
    return tmp_path / "store"


@pytest.fixture
def profile(write_profile: Callable[..., Path], store: Path) -> str:
    """The unit-test cluster's profile (a file) whose assets.store is `store`."""
    return str(write_profile(assets={"store": str(store)}))


@pytest.fixture
def write_recipe(tmp_path: Path) -> Callable[..., Path]:
    def write(data: dict[str, Any] | None = None, name: str = "testrecipe", **over: Any) -> Path:
        content = copy.deepcopy(BASE_RECIPE if data is None else data)
        content.update(over)
        folder = tmp_path / "recipes" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
        (folder / "train.py").write_text("print('hello')\n")
        return folder

    return write
