"""stage-assets against a real hub-compatible server on 127.0.0.1, with injected faults."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.fixtures.hubserver import fixtures as _fx
from tests.fixtures.hubserver.fixtures import AssetEnv, dead_endpoint
from tests.fixtures.hubserver.server import HubServer

hub_root, hub, asset_env = _fx.hub_root, _fx.hub, _fx.asset_env  # the fixtures
MODEL = "tiny-org/tiny-model"
DATASET = "tiny-org/tiny-text"


def _stage(env: AssetEnv, *args: str):
    return env.run("stage-assets", *args, "--profile", "hubtest", "--json", "--timeout", "3")


def _manifest(env: AssetEnv, kind: str, repo: str) -> dict:
    return json.loads(
        (env.store / f"{kind}s" / repo.replace("/", "--") / "main" / "hpclaunch-manifest.json").read_text()
    )


def test_stage_model_and_dataset_then_restage_is_instant(asset_env: AssetEnv, hub: HubServer, hub_root: Path):
    res = _stage(asset_env, "--model", MODEL, "--dataset", f"{DATASET}:big-v1")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [a["status"] for a in out["assets"]] == ["staged", "staged"]

    model_dir = asset_env.store / "models" / "tiny-org--tiny-model" / "main"
    names = sorted(p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file())
    # safetensors preferred over .bin; no .h5/.msgpack/onnx/README; tokenizer files kept
    assert names == [
        "config.json",
        "generation_config.json",
        "hpclaunch-manifest.json",
        "merges.txt",
        "model.safetensors",
        "tokenizer.json",
        "vocab.json",
    ]
    m = _manifest(asset_env, "model", MODEL)
    assert m["repo_id"] == MODEL and m["kind"] == "model" and m["revision"] == "main"
    assert m["commit"] == hub.repo("model", MODEL).sha and m["endpoint"] == hub.url and m["staged_at"]
    src = hub_root / "models" / "tiny-org--tiny-model"
    for f in m["files"]:
        assert f["sha256"] == hashlib.sha256((src / f["path"]).read_bytes()).hexdigest()
        assert f["size"] == (src / f["path"]).stat().st_size

    ds = _manifest(asset_env, "dataset", DATASET)
    assert sorted(f["path"] for f in ds["files"]) == [
        f"big-v1/{s}-00000-of-00001.parquet" for s in ("test", "train", "validation")
    ]
    # no staging folders left beside the assets
    assert not list(asset_env.store.rglob(".staging-*"))

    gets = len(hub.requests)
    # (how fast a re-stage is: benchmarks/stage_assets.py; a test on the shared machine checks what it does)
    again = _stage(asset_env, "--model", MODEL, "--dataset", f"{DATASET}:big-v1")
    assert [a["status"] for a in json.loads(again.stdout)["assets"]] == ["present", "present"]
    assert len(hub.requests) == gets  # no network at all

    listed = json.loads(asset_env.run("assets", "list", "--profile", "hubtest", "--json").stdout)
    assert {(a["kind"], a["repo_id"]) for a in listed["assets"]} == {("model", MODEL), ("dataset", DATASET)}


def test_adding_a_dataset_config_keeps_the_first(asset_env: AssetEnv, hub: HubServer):
    assert _stage(asset_env, "--dataset", f"{DATASET}:small-v1").exit_code == 0
    assert _stage(asset_env, "--dataset", f"{DATASET}:big-v1").exit_code == 0
    ds = _manifest(asset_env, "dataset", DATASET)
    assert ds["configs"] == ["big-v1", "small-v1"] and len(ds["files"]) == 6
    assert hub.count("GET", "small-v1/train") == 1  # the first config was reused, not fetched again


def test_bin_weights_when_no_safetensors(asset_env: AssetEnv):
    assert _stage(asset_env, "--model", "tiny-org/bin-model").exit_code == 0
    files = {f["path"] for f in _manifest(asset_env, "model", "tiny-org/bin-model")["files"]}
    assert files == {"config.json", "pytorch_model.bin"}


def test_dropped_connection_500s_and_wrong_size_are_retried(asset_env: AssetEnv, hub: HubServer):
    hub.faults["drop"]["model.safetensors"] = 1
    hub.faults["error500"].update({"config.json": 2, "api": 1})
    hub.faults["wrong_size"]["tokenizer.json"] = 1
    hub.faults["corrupt"]["vocab.json"] = 1
    res = _stage(asset_env, "--model", MODEL)
    assert res.exit_code == 0, res.output
    assert asset_env.run("assets", "verify", "--profile", "hubtest").exit_code == 0
    assert hub.count("GET", "vocab.json") == 2  # the corrupt copy was caught by sha and fetched again


def test_persistently_corrupt_file_fails_naming_it(asset_env: AssetEnv, hub: HubServer):
    hub.faults["corrupt"]["model.safetensors"] = 99
    res = _stage(asset_env, "--model", MODEL)
    assert res.exit_code == 2
    assert "model.safetensors" in res.stderr and "sha256" in res.stderr
    assert not (asset_env.store / "models" / "tiny-org--tiny-model" / "main").exists()  # never half visible


def test_falls_back_to_the_next_endpoint(asset_env: AssetEnv, hub: HubServer):
    asset_env.profile(mirror=dead_endpoint(), endpoints=(hub.url,))
    res = _stage(asset_env, "--model", MODEL)
    assert res.exit_code == 0, res.output
    assert _manifest(asset_env, "model", MODEL)["endpoint"] == hub.url


def test_unknown_repo_is_named(asset_env: AssetEnv):
    res = _stage(asset_env, "--model", "nobody/nothing-here")
    assert res.exit_code == 2
    assert "'nobody/nothing-here'" in res.stderr and "not found" in res.stderr


def test_unknown_dataset_config_lists_the_available_ones(asset_env: AssetEnv):
    res = _stage(asset_env, "--dataset", f"{DATASET}:huge-v9")
    assert res.exit_code == 2
    assert "huge-v9" in res.stderr and "big-v1, small-v1" in res.stderr


def test_no_endpoint_reachable_fails_quickly(asset_env: AssetEnv):
    asset_env.profile(mirror=dead_endpoint(), endpoints=(dead_endpoint(),))
    t0 = time.monotonic()
    res = _stage(asset_env, "--model", MODEL, "--dataset", f"{DATASET}:big-v1")
    assert res.exit_code == 2
    assert time.monotonic() - t0 < 20
    assert "no endpoint reachable" in res.stderr and "Connection refused" in res.stderr


def test_kill9_during_staging_then_rerun_continues(asset_env: AssetEnv, hub: HubServer):
    hub.faults["slow"]["model.safetensors"] = 50_000  # 300 kB at 50 kB/s: 6 s
    cmd = [
        sys.executable,
        "-m",
        "hpclaunch.cli.main",
        "stage-assets",
        "--model",
        MODEL,
        "--profile",
        "hubtest",
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=False
    )
    staging = asset_env.store / "models" / "tiny-org--tiny-model" / ".staging-main"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (staging / "config.json").is_file():
        time.sleep(0.1)
    assert (staging / "config.json").is_file(), "staging never started"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    final = asset_env.store / "models" / "tiny-org--tiny-model" / "main"
    assert not final.exists()  # nothing half visible
    fetched_config = hub.count("GET", "/config.json")
    hub.faults["slow"].clear()
    res = _stage(asset_env, "--model", MODEL)
    assert res.exit_code == 0, res.output
    assert hub.count("GET", "/config.json") == fetched_config  # finished files were kept, not refetched
    assert asset_env.run("assets", "verify", "--profile", "hubtest").exit_code == 0
