"""`hpclaunch schema profile|recipe`: the JSON Schemas that editors check profile and recipe files with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted((REPO / "cluster_profiles").glob("*.yaml"))
RECIPES = sorted((REPO / "recipes").glob("*/recipe.yaml"))


def _schema(hpclaunch, kind: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{kind}.schema.json"
    result = hpclaunch("schema", kind, "-o", str(out))
    assert result.exit_code == 0, result.output
    schema = json.loads(out.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def _errors(schema: dict, data: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_there_are_bundled_files_to_check():
    assert len(PROFILES) >= 5 and len(RECIPES) >= 4


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_bundled_profiles_validate(hpclaunch, tmp_path, path):
    assert _errors(_schema(hpclaunch, "profile", tmp_path), yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize("path", RECIPES, ids=[p.parent.name for p in RECIPES])
def test_bundled_recipes_and_their_presets_validate(hpclaunch, tmp_path, path):
    data = yaml.safe_load(path.read_text())
    assert _errors(_schema(hpclaunch, "recipe", tmp_path), data) == []


def test_the_schema_refuses_what_the_loader_refuses(hpclaunch, tmp_path):
    profile = _schema(hpclaunch, "profile", tmp_path)
    good = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    assert _errors(profile, {**good, "partitons": {}}) != []          # unknown key
    bad_partition = {**good, "partitions": {"debug": {"gpus_per_node": 4, "cpus_per_node": 1, "max_tim": "1"}}}
    assert any("max_tim" in e for e in _errors(profile, bad_partition))
    no_backend = {k: v for k, v in good.items() if k != "backend"}
    assert any("backend" in e for e in _errors(profile, no_backend))
    # what the loader converts is allowed as written: a time in minutes, a number in env
    assert _errors(profile, {**good, "defaults": {"time": 90}, "env": {"OMP_NUM_THREADS": 1}}) == []
    recipe = _schema(hpclaunch, "recipe", tmp_path)
    assert _errors(recipe, {"script": "train.py", "launcher": "torchrun", "presets": {"tiny": {"train": {"lr": 1}}},
                            "default_preset": "tiny"}) == []
    assert _errors(recipe, {"script": "train.py", "launcher": "pytorch"}) != []
    assert _errors(recipe, {"script": "train.py", "launcher": "torchrun",
                            "presets": {"tiny": {"train": {"learning_rate": 1}}}}) != []


def test_fields_carry_their_descriptions(hpclaunch, tmp_path):
    profile = _schema(hpclaunch, "profile", tmp_path)
    partition = profile["$defs"]["Partition"]["properties"]
    assert "per node" in partition["gpus_per_node"]["description"]
    assert "Slurm time" in partition["max_time"]["description"]


def test_schema_to_stdout_and_a_bad_kind(hpclaunch):
    result = hpclaunch("schema", "recipe")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "hpclaunch recipe"
    assert hpclaunch("schema", "cluster").exit_code == 2


def test_the_schema_command_imports_no_training_library(hpc_home):
    probe = ("import sys\nfrom hpclaunch.cli.main import cli\n"
             "try:\n    cli(['schema', 'profile'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('torch', 'transformers', 'deepspeed') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
