"""The store after staging: verify, submit's asset check, pack/unpack, and an offline load by transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hpclaunch.assets.requests import parse_dataset, parse_model, requests_for_spec, select_files
from hpclaunch.submission.resolve import CliOverrides, resolve
from tests.fixtures.hubserver import fixtures as _fx
from tests.fixtures.hubserver import repos
from tests.fixtures.hubserver.fixtures import AssetEnv
from tests.fixtures.hubserver.server import HubServer

hub_root, hub, asset_env = _fx.hub_root, _fx.hub, _fx.asset_env  # the fixtures
MODEL = "tiny-org/tiny-model"
DATASET = "tiny-org/tiny-text"


def _stage(env: AssetEnv, *args: str, profile: str = "hubtest"):
    return env.run("stage-assets", *args, "--profile", profile, "--timeout", "3")


def test_corrupt_file_found_by_verify_and_refused_by_submit(asset_env: AssetEnv, hub: HubServer):
    asset_env.recipe("hubrecipe", MODEL, DATASET, "small-v1")
    res = _stage(asset_env, "hubrecipe")
    assert res.exit_code == 0, res.output
    assert asset_env.run("assets", "verify", "--profile", "hubtest").exit_code == 0

    weights = asset_env.store / "models" / "tiny-org--tiny-model" / "main" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[1000] ^= 0xFF  # same size: only a hash finds it
    weights.write_bytes(bytes(data))

    verify = asset_env.run("assets", "verify", "--profile", "hubtest")
    assert verify.exit_code == 2
    assert str(weights) in verify.stderr and "corrupt" in verify.stderr

    submit = asset_env.run("submit", "hubrecipe", "--profile", "hubtest")
    assert submit.exit_code == 2
    assert "model.safetensors" in submit.stderr
    assert "hpclaunch stage-assets --model tiny-org/tiny-model --profile hubtest" in submit.stderr
    assert not list((asset_env.root.parent / "hpclaunch-home").rglob("registry/*.json"))  # nothing queued

    dry = asset_env.run("submit", "hubrecipe", "--profile", "hubtest", "--dry-run")
    assert dry.exit_code == 0 and "#!/bin/bash" in dry.stdout
    assert "warning" in dry.stderr and "model.safetensors" in dry.stderr

    before = hub.count("GET", "/resolve/")
    assert _stage(asset_env, "hubrecipe").exit_code == 0  # repairs: only the bad file is fetched again
    assert hub.count("GET", "/resolve/") == before + 1
    assert asset_env.run("assets", "verify", "--profile", "hubtest").exit_code == 0
    dry = asset_env.run("submit", "hubrecipe", "--profile", "hubtest", "--dry-run")
    assert dry.exit_code == 0 and "warning" not in dry.stderr


def test_store_copied_without_mtimes_is_accepted_after_verify(asset_env: AssetEnv):
    asset_env.recipe("hubrecipe", MODEL, None, None)
    assert _stage(asset_env, "hubrecipe").exit_code == 0
    for f in (asset_env.store / "models").rglob("*.json"):
        os.utime(f, (1_000_000, 1_000_000))  # e.g. `cp -r` without -p: same bytes, new mtimes
    res = asset_env.run("submit", "hubrecipe", "--profile", "hubtest")
    assert res.exit_code == 2 and "modified since" in res.stderr
    assert "hpclaunch assets verify --profile hubtest" in res.stderr
    assert asset_env.run("assets", "verify", "--profile", "hubtest").exit_code == 0
    dry = asset_env.run("submit", "hubrecipe", "--profile", "hubtest", "--dry-run")
    assert dry.exit_code == 0 and "warning" not in dry.stderr


def test_missing_assets_refused_with_the_command_that_fixes_them(asset_env: AssetEnv):
    asset_env.recipe("hubrecipe", MODEL, DATASET, "small-v1")
    res = asset_env.run("submit", "hubrecipe", "--profile", "hubtest")
    assert res.exit_code == 2
    assert (
        "hpclaunch stage-assets --model tiny-org/tiny-model --dataset tiny-org/tiny-text:small-v1 "
        "--profile hubtest"
    ) in res.stderr
    assert "Traceback" not in res.output


def test_pack_then_unpack_on_the_cluster_side(asset_env: AssetEnv, tmp_path: Path):
    tar = tmp_path / "assets.tar"
    res = _stage(asset_env, "--model", MODEL, "--dataset", f"{DATASET}:small-v1", "--pack", str(tar))
    assert res.exit_code == 0, res.output
    with tarfile.open(tar) as t:
        names = t.getnames()
    assert "models/tiny-org--tiny-model/main/hpclaunch-manifest.json" in names
    assert "datasets/tiny-org--tiny-text/main/small-v1/train-00000-of-00001.parquet" in names

    asset_env.profile("cluster", store=tmp_path / "cluster-store")
    res = asset_env.run("assets", "unpack", str(tar), "--profile", "cluster")
    assert res.exit_code == 0, res.output
    assert asset_env.run("assets", "verify", "--profile", "cluster").exit_code == 0

    # a tar whose file was damaged on the way is refused and nothing of that asset is installed
    bad = tmp_path / "bad.tar"
    with tarfile.open(tar) as src, tarfile.open(bad, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name.endswith("model.safetensors"):
                data = bytes([data[0] ^ 1]) + data[1:]
            import io

            dst.addfile(member, io.BytesIO(data))
    asset_env.profile("cluster2", store=tmp_path / "cluster2-store")
    res = asset_env.run("assets", "unpack", str(bad), "--profile", "cluster2")
    assert res.exit_code == 2 and "model.safetensors" in res.stderr
    assert not (tmp_path / "cluster2-store" / "models" / "tiny-org--tiny-model" / "main").exists()


def test_bundled_full_recipe_dry_run_warns_but_renders(asset_env: AssetEnv):
    spec = resolve("gpt2", "guangzhou-a800")
    assert [q.cli_arg() for q in requests_for_spec(spec)] == [
        "--model gpt2",
        "--dataset Salesforce/wikitext:wikitext-103-raw-v1",
    ]
    assert requests_for_spec(resolve("gpt2", "guangzhou-a800", CliOverrides(preset="tiny"))) == []
    res = asset_env.run("submit", "gpt2", "--profile", "guangzhou-a800", "--dry-run")
    assert res.exit_code == 0
    assert "#SBATCH" in res.stdout and "hpclaunch: warning:" in res.stderr
    assert (
        "hpclaunch stage-assets --model gpt2 --dataset Salesforce/wikitext:wikitext-103-raw-v1" in res.stderr
    )


def test_file_selection_and_refs():
    paths = [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "pytorch_model.bin",
        "tf_model.h5",
        "flax_model.msgpack",
        "onnx/model.onnx",
        "tokenizer.json",
        "tokenizer_config.json",
        "README.md",
    ]
    got, problems = select_files("model", paths, ["config", "weights"])
    assert (
        got
        == [
            "config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
        ]
        and not problems
    )
    assert select_files("model", paths, ["tokenizer"])[0] == ["tokenizer.json", "tokenizer_config.json"]
    assert select_files("dataset", ["data/train-0.parquet", "README.md"], configs=[""])[0] == [
        "data/train-0.parquet"
    ]
    assert parse_dataset("Salesforce/wikitext:wikitext-2-raw-v1@abc").configs == {"wikitext-2-raw-v1"}
    assert parse_model("gpt2@v1").revision == "v1"


@pytest.mark.slow
def test_staged_tiny_gpt2_loads_offline_with_transformers(asset_env: AssetEnv, hub_root: Path):
    repos.gpt2_model(hub_root, "tiny-org/gpt2-tiny")
    assert _stage(asset_env, "--model", "tiny-org/gpt2-tiny").exit_code == 0
    folder = asset_env.store / "models" / "tiny-org--gpt2-tiny" / "main"
    code = (
        "import sys, torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "model = AutoModelForCausalLM.from_pretrained(sys.argv[1])\n"
        "ids = tok('to be or not', return_tensors='pt').input_ids\n"
        "assert tok.unk_token_id not in ids[0].tolist(), ids\n"
        "print('logits', tuple(model(ids).logits.shape))\n"
    )
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_ENDPOINT="http://127.0.0.1:9",
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "logits (1, " in proc.stdout
    manifest = json.loads((folder / "hpclaunch-manifest.json").read_text())
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= {f["path"] for f in manifest["files"]}


@pytest.mark.slow
def test_staged_dataset_loads_offline_by_local_path(asset_env: AssetEnv):
    assert _stage(asset_env, "--dataset", f"{DATASET}:small-v1").exit_code == 0
    folder = asset_env.store / "datasets" / "tiny-org--tiny-text" / "main"
    code = (
        "import sys\n"
        "from datasets import load_dataset\n"
        "from hpclaunch.assets.store import dataset_files\n"
        "files = {s: dataset_files(sys.argv[1], 'small-v1', s) for s in ('train', 'validation')}\n"
        "ds = load_dataset('parquet', data_files=files)\n"
        "print(len(ds['train']), ds['validation'][0]['text'])\n"
    )
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_ENDPOINT="http://127.0.0.1:9",
        HF_DATASETS_CACHE=str(asset_env.root / "ds-cache"),
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["50", "small-v1", "validation", "line", "0"]
