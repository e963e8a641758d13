"""`hpclaunch assets import`: hand-downloaded files enter the store with a manifest, `assets verify` and the
submit preflight accept them; bad input exits 2 and writes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hpclaunch.assets.store import asset_path, read_manifest


@pytest.fixture
def downloaded(tmp_path: Path) -> Path:
    """A model folder as a user downloads it by hand (plus a README the hub has too)."""
    folder = tmp_path / "Downloads" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "gpt2", "n_layer": 1}')
    (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    (folder / "README.md").write_text("# tiny\n")
    return folder


def _dry_run_stderr(hpclaunch, recipe: Path, profile: str) -> str:
    result = hpclaunch("submit", str(recipe), "--profile", profile, "--dry-run")
    assert result.exit_code == 0, result.output
    return result.stderr


def test_import_then_verify_and_preflight_accept_it(hpclaunch, write_recipe, profile, store, downloaded):
    recipe = write_recipe(model={"repo": "org/tiny"}, tokenizer={"repo": "org/tiny"})
    assert "model 'org/tiny' (revision main) is not staged" in _dry_run_stderr(hpclaunch, recipe, profile)

    result = hpclaunch("assets", "import", str(downloaded), "--model", "org/tiny", "--profile", profile)
    assert result.exit_code == 0, result.output
    folder = asset_path(store, "model", "org/tiny", "main")
    assert f"-> {folder}" in result.stdout
    manifest = read_manifest(folder)
    assert manifest is not None and manifest.parts == ["config", "weights", "tokenizer"]
    by_path = {f.path: f for f in manifest.files}
    assert set(by_path) == {"config.json", "model.safetensors", "tokenizer.json", "README.md"}
    assert by_path["model.safetensors"].sha256 == hashlib.sha256(b"\0" * 4096).hexdigest()
    assert (downloaded / "config.json").exists()  # copied, the user's files stay
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".staging-")]

    verify = hpclaunch("assets", "verify", "--profile", profile)
    assert verify.exit_code == 0, verify.output
    assert "ok      model org/tiny@main (4 files)" in verify.stdout
    assert "org/tiny" not in _dry_run_stderr(hpclaunch, recipe, profile)  # the asset check passes

    # a corrupted file is then caught by verify, as for a staged asset
    (folder / "model.safetensors").write_bytes(b"\1" * 4096)
    assert hpclaunch("assets", "verify", "--profile", profile).exit_code == 2


def test_import_a_dataset_with_a_revision(hpclaunch, profile, store, tmp_path):
    folder = tmp_path / "wikitext"
    (folder / "wikitext-2-raw-v1").mkdir(parents=True)
    (folder / "wikitext-2-raw-v1" / "train-00000-of-00001.parquet").write_bytes(b"PAR1 train")
    (folder / "wikitext-2-raw-v1" / "validation-00000-of-00001.parquet").write_bytes(b"PAR1 valid")
    result = hpclaunch("assets", "import", str(folder), "--dataset", "Salesforce/wikitext", "--revision", "v1",
                       "--profile", profile, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # the only config also serves a recipe that names none (as stage-assets chooses files)
    assert (out["configs"], out["files"]) == (["", "wikitext-2-raw-v1"], 2)
    assert read_manifest(asset_path(store, "dataset", "Salesforce/wikitext", "v1")) is not None
    assert hpclaunch("assets", "verify", "--profile", profile).exit_code == 0


@pytest.mark.parametrize("case", ["missing", "empty", "both", "neither", "not-a-model", "bad-id"])
def test_bad_input_exits_2_and_writes_nothing(hpclaunch, profile, store, downloaded, tmp_path, case):
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("not a model")
    args = {
        "missing": [str(tmp_path / "nope"), "--model", "org/tiny"],
        "empty": [str(empty), "--model", "org/tiny"],
        "both": [str(downloaded), "--model", "org/tiny", "--dataset", "org/data"],
        "neither": [str(downloaded)],
        "not-a-model": [str(junk), "--model", "org/tiny"],
        "bad-id": [str(downloaded), "--model", "not a repo"],
    }[case]
    result = hpclaunch("assets", "import", *args, "--profile", profile)
    assert result.exit_code == 2, result.output
    message = result.stderr
    assert message.startswith("hpclaunch: error: ") and "Traceback" not in message
    expected = {"missing": "does not exist", "empty": "holds no files", "both": "exactly one of",
                "neither": "exactly one of", "not-a-model": "no model files", "bad-id": "not a hub repo id"}[case]
    assert expected in message
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*") if not p.name.startswith(".lock-"))
