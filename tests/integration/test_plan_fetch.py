"""`hpclaunch plan` of a hub model whose config.json the store lacks, against the loopback hub server: the config
alone is fetched from the profile's mirror (or --endpoint) into the store, marked config-only, so that a submit
still refuses the job until its weights are staged; offline, the error says how to import the file by hand,
and that command, pasted, works."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml

from tests.fixtures.hubserver import fixtures as _fx
from tests.fixtures.hubserver.fixtures import AssetEnv, dead_endpoint
from tests.fixtures.hubserver.server import HubServer

hub_root, hub, asset_env = _fx.hub_root, _fx.hub, _fx.asset_env  # the fixtures
MODEL = "tiny-org/tiny-model"


def _model_dir(env: AssetEnv) -> Path:
    return env.store / "models" / MODEL.replace("/", "--") / "main"


def _plan(env: AssetEnv, *args: str):
    return env.run("plan", "hubmodel", *args, "--json")


def test_plan_fetches_the_config_alone_and_a_submit_still_wants_the_weights(asset_env: AssetEnv, hub: HubServer):
    asset_env.recipe("hubmodel", MODEL, None, None)
    r = _plan(asset_env, "--profile", "hubtest")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["params"] > 0
    assert f"fetched the config of model {MODEL} alone from {hub.url}" in r.stderr
    assert "a submit still needs its weights: hpclaunch stage-assets hubmodel --profile hubtest" in r.stderr
    fetched = sorted(path.split("/")[-1] for verb, path in hub.requests if verb == "GET" and "/resolve/" in path)
    assert fetched == ["config.json", "generation_config.json"]  # no weights, no tokenizer
    manifest = json.loads((_model_dir(asset_env) / "hpclaunch-manifest.json").read_text())
    assert manifest["parts"] == ["config"] and manifest["endpoint"] == hub.url
    assert sorted(f["path"] for f in manifest["files"]) == ["config.json", "generation_config.json"]

    asked = len(hub.requests)
    assert _plan(asset_env, "--profile", "hubtest").exit_code == 0
    assert len(hub.requests) == asked  # staged now: the second plan reads the store

    refused = asset_env.run("submit", "hubmodel", "--profile", "hubtest")
    assert refused.exit_code == 2, refused.output
    assert (f"model '{MODEL}' (revision main) is staged without tokenizer, weights (only its config, which "
            "`hpclaunch plan` fetched)") in refused.stderr
    stage = re.search(r"run `(hpclaunch stage-assets [^`]+)`", refused.stderr).group(1)  # type: ignore[union-attr]
    assert asset_env.run(*shlex.split(stage)[1:], "--timeout", "3").exit_code == 0  # the hint, pasted
    manifest = json.loads((_model_dir(asset_env) / "hpclaunch-manifest.json").read_text())
    assert manifest["parts"] == ["config", "tokenizer", "weights"]
    assert asset_env.run("submit", "hubmodel", "--profile", "hubtest", "--dry-run").stderr.count("warning") == 0


def test_offline_the_error_says_how_to_import_the_config_and_that_works(asset_env: AssetEnv, tmp_path: Path,
                                                                        hub_root: Path):
    asset_env.recipe("hubmodel", MODEL, None, None)
    asset_env.profile("offline", mirror=dead_endpoint())
    profile_file = asset_env.root / "cluster_profiles" / "offline.yaml"  # given as a file: the hint repeats it
    r = _plan(asset_env, "--profile", str(profile_file))
    assert r.exit_code == 2, r.output
    assert f"the config of model '{MODEL}' is not in the store" in r.stderr
    assert "no endpoint answered to fetch it" in r.stderr and "Traceback" not in r.output
    command = f"hpclaunch assets import config.json --model {MODEL} --profile {shlex.quote(str(profile_file))}"
    assert f"`{command}`" in r.stderr
    assert f"https://huggingface.co/{MODEL}/resolve/main/config.json" in r.stderr
    assert not _model_dir(asset_env).exists()

    downloaded = tmp_path / "downloads" / "config.json"  # what the user fetched elsewhere, as the hint says
    downloaded.parent.mkdir()
    downloaded.write_bytes((hub_root / "models" / MODEL.replace("/", "--") / "config.json").read_bytes())
    imported = asset_env.run(*shlex.split(command.replace("config.json", str(downloaded), 1))[1:])
    assert imported.exit_code == 0, imported.output
    assert _plan(asset_env, "--profile", str(profile_file)).exit_code == 0
    assert json.loads((_model_dir(asset_env) / "hpclaunch-manifest.json").read_text())["parts"] == ["config"]


def test_endpoint_replaces_the_profiles_mirror(asset_env: AssetEnv, hub: HubServer):
    asset_env.recipe("hubmodel", MODEL, None, None)
    asset_env.profile("offline", mirror=dead_endpoint())
    r = _plan(asset_env, "--profile", "offline", "--endpoint", hub.url)
    assert r.exit_code == 0, r.output
    assert f"alone from {hub.url}" in r.stderr
    assert yaml.safe_load((asset_env.root / "cluster_profiles" / "offline.yaml").read_text())["assets"]["mirror"]
