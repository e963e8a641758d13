"""Seed 002's hand-downloaded files (issue 34.1), brought in as docs/offline-assets.md says: the commands of its
"Seed 002's layout" section run as pasted (P: the `local` profile) in a folder laid out as the seed's, holding a small
BERT (tests/fixtures/seed002.py); the doc's submit, with flags that only make the run small (1 rank, 2 steps of
32-token blocks), trains it for real under the recipe's deepspeed launcher. Before this, the same files needed three
`--set`s and the job died at its first step ("can't assign a NoneType": a tokenizer loaded without its mask token).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.seed002 import bert_seed_layout
from tests.integration.waiting import LONG_S
from tests.unit.test_docs_commands import joined_lines

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "offline-assets.md"
SECTION = "### Seed 002's layout"
# what makes the doc's submit small here (the recipe's full preset asks 1n8g, seq_len 512, 64 sequences a step)
SMALL = ("--layout", "1n1g", "--set", "train.max_steps=2", "--set", "train.micro_batch_size=2", "--set",
         "train.grad_accum=1", "--set", "train.seq_len=32", "--set", "train.warmup_steps=1", "--set",
         "train.log_every=1", "--set", "train.save_every=0", "--follow")


def doc_commands() -> list[str]:
    """The section's commands (`cd` and `hpclaunch ...`), in order."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    section = text[start:text.index("\n## ", start)]
    return [line.strip() for _, line in joined_lines(section) if line.strip().startswith(("cd ", "hpclaunch "))]


def test_seed_002_files_as_downloaded_import_and_train(tmp_path):
    commands = doc_commands()
    assert [c.split()[0:3] for c in commands if c.startswith("hpclaunch")] == [
        ["hpclaunch", "assets", "import"]] * 3 + [["hpclaunch", "submit", "recipes/bert_large"]]
    assert not any("--set" in c for c in commands)  # the three --set flags of issue 34 are not needed any more

    bert_seed_layout(tmp_path)
    home = tmp_path / "home"  # the local profile's store is ~/.hpclaunch/assets
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HPCLAUNCH_HOME": str(tmp_path / "hpclaunch-home"),
           # DeepSpeed's CPU comm op, built once per machine (~90 s), from the user's cache
           "TORCH_EXTENSIONS_DIR": os.environ.get("TORCH_EXTENSIONS_DIR",
                                                  str(Path.home() / ".cache" / "torch_extensions")),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cwd, said = tmp_path, []
    for command in commands:
        words = shlex.split(command)
        if words[0] == "cd":
            cwd = cwd / words[1]
            continue
        words = ["local" if i and words[i - 1] == "--profile" and w == "P" else w for i, w in enumerate(words)]
        if words[1] == "submit":
            words += SMALL
        done = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=LONG_S)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr
        said.append(done.stdout + done.stderr)
    model, tokenizer, data, submit = said

    store = home / ".hpclaunch" / "assets"
    folder = store / "models" / "google-bert--bert-large-uncased" / "main"
    assert "it holds config, weights (2 files" in model
    assert "it holds config, weights, tokenizer (5 files" in tokenizer
    assert "kept from the store: config, weights" in tokenizer
    assert "wrote tokenizer_config.json: the special tokens [UNK] [SEP] [PAD] [CLS] [MASK] (found in tokenizer.json)" \
        in tokenizer
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "hpclaunch-manifest.json", "pytorch_model.bin",
                                                        "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    manifest = json.loads((folder / "hpclaunch-manifest.json").read_text())
    assert manifest["parts"] == ["config", "weights", "tokenizer"]
    assert manifest["tokenizer"]["special_tokens"]["mask_token"] == "[MASK]"
    assert "it holds (default config), wikitext-2-raw-v1" in data
    assert (store / "datasets" / "Salesforce--wikitext" / "main" / "wikitext-2-raw-v1" /
            "train-00000-of-00001.parquet").is_file()

    # the job: accepted with a word about the missing validation split, then trained to the end
    assert "has no 'validation' split (it has: train): the job trains without evaluation" in submit
    assert "COMPLETED" in submit, submit[-3000:]
    run_dir = Path(next(line.split(": ", 1)[1] for line in submit.splitlines() if line.startswith("run directory: ")))
    steps = [json.loads(line) for line in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in steps if r["kind"] == "train"]
    assert len(losses) == 2 and all(0 < loss < 20 for loss in losses), steps

    # the store's tokenizer loads with its special tokens in transformers, as the job loaded it
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(folder)
    assert (loaded.mask_token, loaded.pad_token, loaded.cls_token) == ("[MASK]", "[PAD]", "[CLS]")
