"""pytest fixtures for the asset tests: ``from tests.hubserver.fixtures import *`` in a test module."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from tests.hubserver import repos
from tests.hubserver.server import HubServer

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def hub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    repos.synthetic_model(root)
    repos.bin_only_model(root)
    repos.dataset(root)
    return root


@pytest.fixture
def hub(hub_root: Path) -> Iterator[HubServer]:
    with HubServer(hub_root) as server:
        yield server


def dead_endpoint() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@dataclass
class AssetEnv:
    root: Path
    store: Path
    run: Callable[..., Result]

    def profile(
        self,
        name: str = "hubtest",
        *,
        store: Path | None = None,
        mirror: str | None = None,
        endpoints: tuple[str, ...] = (),
    ) -> str:
        data = {
            "description": "asset tests",
            "scheduler": "local",
            "accelerator": "cpu",
            "backend": "gloo",
            "default_partition": "local",
            "partitions": {"local": {"gpus_per_node": 2, "cpus_per_node": 2, "max_nodes": 1, "gres": None}},
            "assets": {"store": str(store or self.store), "mirror": mirror, "endpoints": list(endpoints)},
        }
        (self.root / "cluster_profiles").mkdir(parents=True, exist_ok=True)
        (self.root / "cluster_profiles" / f"{name}.yaml").write_text(yaml.safe_dump(data))
        return name

    def recipe(self, name: str, model: str | None, dataset: str | None, config: str | None) -> Path:
        folder = self.root / "recipes" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "train.py").write_text("print('hello')\n")
        data: dict = {
            "description": "hub assets",
            "script": "train.py",
            "launcher": "torchrun",
            "layout": "1n1g",
            "time": "00:05:00",
        }
        if model:
            data["model"] = {"repo": model}
            data["tokenizer"] = {"repo": model}
        if dataset:
            data["dataset"] = {"repo": dataset, "name": config}
        (folder / "recipe.yaml").write_text(yaml.safe_dump(data))
        return folder


@pytest.fixture
def asset_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: HubServer) -> AssetEnv:
    root = tmp_path / "config-root"
    home = tmp_path / "hpclaunch-home"
    home.mkdir()
    monkeypatch.setenv("HPCLAUNCH_HOME", str(home))
    monkeypatch.setenv("HPCLAUNCH_PATH", f"{root}:{TESTS}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    from hpclaunch.cli.main import cli

    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(cli, list(args), catch_exceptions=False, prog_name="hpclaunch")

    env = AssetEnv(root, tmp_path / "store", run)
    env.profile(mirror=hub.url)
    return env
