"""Tokenizers brought in by hand (issue 34.1, seed 002): what their files hold, read without transformers; the
tokenizer_config.json `assets import` writes where the files name no special tokens; parts of one model imported from
two folders; datasets imported as ID:CONFIG; and preflight refusing, before queueing, a masked-LM job whose tokenizer
has no mask token or a dataset without its train split (exit 2, the folder, the files and the fix named)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from hpclaunch.assets.store import FileEntry, Manifest, asset_path, read_manifest, sha256_file, write_manifest
from hpclaunch.assets.tokenizer_files import completed_config, missing_for, read_tokenizer

BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "to", "be", "or", "not", "##s"]


def _write(folder: Path, files: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def bert_tokenizer_json(vocab: list[str] = BERT_VOCAB) -> dict:
    """The shape of the hub's bert-base/large-uncased tokenizer.json (the parts the reader looks at)."""
    return {"version": "1.0", "normalizer": {"type": "BertNormalizer", "lowercase": True},
            "added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(vocab) if t[0] == "["],
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {t: i for i, t in enumerate(vocab)}}}


def seed_tokenizer(folder: Path) -> Path:
    """Seed 002's ./tokenizer: tokenizer.json and vocab.txt, no tokenizer_config.json."""
    return _write(folder, {"tokenizer.json": bert_tokenizer_json(), "vocab.txt": "\n".join(BERT_VOCAB) + "\n"})


def gpt2_tokenizer(folder: Path) -> Path:
    return _write(folder, {"vocab.json": {"<|endoftext|>": 0, "to": 1, "be": 2}, "merges.txt": "#version: 0.2\nt o\n"})


# --- what the files hold ----------------------------------------------------------------------------------------


def test_a_bert_tokenizer_without_config_holds_its_special_tokens_but_names_none(tmp_path):
    info = read_tokenizer(seed_tokenizer(tmp_path / "tokenizer"))
    assert (info.kind, info.vocab_file, info.declared) == ("wordpiece", "tokenizer.json", {})
    assert info.conventional() == {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                                   "cls_token": "[CLS]", "mask_token": "[MASK]"}
    assert info.effective() == {}  # what transformers loads it with: nothing (the job's 'mask_token None')
    assert [role for role, _ in missing_for("masked-lm", info)] == ["mask_token"]
    assert missing_for("causal-lm", info) == []

    done = completed_config(info)
    assert done is not None
    assert done.content == {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "sep_token": "[SEP]",
                            "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}
    assert done.describe(info) == ("wrote tokenizer_config.json: tokenizer_class PreTrainedTokenizerFast, the special "
                                   "tokens [UNK] [SEP] [PAD] [CLS] [MASK] (found in tokenizer.json)")


@pytest.mark.parametrize("words, lower", [(BERT_VOCAB, True), ([*BERT_VOCAB, "Hamlet"], False)])
def test_a_vocab_txt_alone_is_loaded_as_bert_and_its_case_read_from_the_words(tmp_path, words, lower):
    info = read_tokenizer(_write(tmp_path / "t", {"vocab.txt": "\n".join(words)}))
    done = completed_config(info)
    assert done is not None
    assert (done.content["tokenizer_class"], done.content["do_lower_case"], done.content["mask_token"]) == (
        "BertTokenizer", lower, "[MASK]")


def test_a_users_own_config_is_kept_and_only_what_it_leaves_out_added(tmp_path):
    folder = seed_tokenizer(tmp_path / "t")
    _write(folder, {"tokenizer_config.json": {"do_lower_case": True, "model_max_length": 512, "mask_token": "[MASK]"}})
    info = read_tokenizer(folder)
    assert info.declared_in == {"mask_token": "tokenizer_config.json"} and missing_for("masked-lm", info) == []
    done = completed_config(info)
    assert done is not None
    assert done.content == {"do_lower_case": True, "model_max_length": 512, "mask_token": "[MASK]",
                            "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "sep_token": "[SEP]",
                            "pad_token": "[PAD]", "cls_token": "[CLS]"}
    assert done.describe(info).startswith("added to tokenizer_config.json: ")


def test_files_that_say_everything_get_nothing_written(tmp_path):
    folder = seed_tokenizer(tmp_path / "t")
    _write(folder, {"special_tokens_map.json": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                                                "cls_token": {"content": "[CLS]", "lstrip": False},
                                                "mask_token": "[MASK]"},
                    "tokenizer_config.json": {"tokenizer_class": "BertTokenizer"}})
    info = read_tokenizer(folder)
    assert info.effective()["cls_token"] == "[CLS]"
    assert completed_config(info) is None


def test_a_model_config_beside_the_tokenizer_gives_its_class_and_defaults(tmp_path):
    """A hub BERT folder (config.json model_type bert): transformers picks BertTokenizerFast, whose defaults name
    [MASK]; no class is written, only the tokens."""
    folder = seed_tokenizer(tmp_path / "m")
    _write(folder, {"config.json": {"model_type": "bert"}})
    info = read_tokenizer(folder)
    assert info.effective()["mask_token"] == "[MASK]" and missing_for("masked-lm", info) == []
    done = completed_config(info)
    assert done is not None and "tokenizer_class" not in done.content


def test_a_gpt2_tokenizer_has_no_mask_token_anywhere(tmp_path):
    info = read_tokenizer(gpt2_tokenizer(tmp_path / "g"))
    assert info.kind == "bpe"
    assert info.conventional() == {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                   "unk_token": "<|endoftext|>"}
    done = completed_config(info)
    assert done is not None and done.content["tokenizer_class"] == "GPT2Tokenizer"
    assert [role for role, _ in missing_for("masked-lm", info)] == ["mask_token"]


# --- assets import ---------------------------------------------------------------------------------------------


def model_folder(folder: Path, weights: str = "pytorch_model.bin") -> Path:
    """Seed 002's ./model: config.json and the weights."""
    _write(folder, {"config.json": {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2,
                                    "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 10}})
    (folder / weights).write_bytes(b"\0" * 2048)
    return folder


def test_a_tokenizer_folder_joins_the_models_parts_and_names_its_tokens(hpclaunch, profile, store, tmp_path):
    model = hpclaunch("assets", "import", str(model_folder(tmp_path / "model")), "--model", "org/bert",
                      "--profile", profile)
    assert model.exit_code == 0, model.output
    tok = hpclaunch("assets", "import", str(seed_tokenizer(tmp_path / "tokenizer")), "--model", "org/bert",
                    "--profile", profile)
    assert tok.exit_code == 0, tok.output
    folder = asset_path(store, "model", "org/bert")
    assert f"imported model org/bert@main: 2 files copied -> {folder}" in tok.stdout
    assert "it holds config, weights, tokenizer (5 files" in tok.stdout
    assert "kept from the store: config, weights" in tok.stdout
    # config.json (model_type bert) is beside it now: transformers' class is known, only the tokens are named
    assert ("wrote tokenizer_config.json: the special tokens [UNK] [SEP] [PAD] [CLS] [MASK] (found in tokenizer.json)"
            in tok.stdout)
    assert "tokenizer (wordpiece): unk [UNK], sep [SEP], pad [PAD], cls [CLS], mask [MASK]" in tok.stdout
    assert not (tmp_path / "tokenizer" / "tokenizer_config.json").exists()  # the user's folder is not touched

    manifest = read_manifest(folder)
    assert manifest is not None and manifest.parts == ["config", "weights", "tokenizer"]
    assert [f.path for f in manifest.files] == ["config.json", "pytorch_model.bin", "tokenizer.json",
                                                "tokenizer_config.json", "vocab.txt"]
    assert manifest.tokenizer["special_tokens"]["mask_token"] == "[MASK]"
    assert json.loads((folder / "tokenizer_config.json").read_text())["mask_token"] == "[MASK]"
    assert hpclaunch("assets", "verify", "--profile", profile).exit_code == 0  # the written file is hashed too

    # weights imported again (as safetensors) replace the old ones and keep the tokenizer
    again = hpclaunch("assets", "import", str(model_folder(tmp_path / "model2", "model.safetensors")), "--model",
                      "org/bert", "--profile", profile)
    assert again.exit_code == 0, again.output
    assert "kept from the store: tokenizer" in again.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "hpclaunch-manifest.json", "model.safetensors",
                                                        "tokenizer.json", "tokenizer_config.json", "vocab.txt"]


def test_a_tokenizer_file_that_is_not_json_is_refused_and_nothing_written(hpclaunch, profile, store, tmp_path):
    folder = seed_tokenizer(tmp_path / "tokenizer")
    (folder / "tokenizer.json").write_text("<html>502 Bad Gateway</html>")
    result = hpclaunch("assets", "import", str(folder), "--model", "org/bert", "--profile", profile)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"hpclaunch: error: {folder / 'tokenizer.json'} is not a readable JSON file")
    assert "download the file again" in result.stderr and "Traceback" not in result.stderr
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*") if not p.name.startswith(".lock-"))


def test_a_dataset_imported_as_a_config_goes_under_it_and_keeps_the_others(hpclaunch, profile, store, tmp_path):
    data = tmp_path / "data"
    _write(data, {"train-00000-of-00001.parquet": "PAR1 train"})
    first = hpclaunch("assets", "import", str(data), "--dataset", "Salesforce/wikitext:wikitext-2-raw-v1",
                      "--profile", profile)
    assert first.exit_code == 0, first.output
    folder = asset_path(store, "dataset", "Salesforce/wikitext")
    assert (folder / "wikitext-2-raw-v1" / "train-00000-of-00001.parquet").read_text() == "PAR1 train"
    other = tmp_path / "data103"
    _write(other, {"train-00000-of-00002.parquet": "PAR1 a", "validation-00000-of-00001.parquet": "PAR1 b"})
    second = hpclaunch("assets", "import", str(other), "--dataset", "Salesforce/wikitext:wikitext-103-raw-v1",
                       "--profile", profile, "--json")
    assert second.exit_code == 0, second.output
    out = json.loads(second.stdout)
    assert (out["configs"], out["kept"], out["files"], out["copied"]) == (
        ["wikitext-103-raw-v1", "wikitext-2-raw-v1"], ["wikitext-2-raw-v1"], 3, 2)

    clash = hpclaunch("assets", "import", str(data), "--dataset", "Salesforce/wikitext@v2", "--revision", "v1",
                      "--profile", profile)
    assert clash.exit_code == 2 and "two revisions: 'v2'" in clash.stderr


# --- preflight ---------------------------------------------------------------------------------------------------


def staged_by_hand(store: Path, repo: str, source: Path) -> Path:
    """An asset as stage-assets leaves it (a hub repo whose files name no special tokens): files and manifest."""
    folder = asset_path(store, "model", repo)
    folder.mkdir(parents=True)
    entries = []
    for f in sorted(source.iterdir()):
        (folder / f.name).write_bytes(f.read_bytes())
        st = (folder / f.name).stat()
        entries.append(FileEntry(f.name, st.st_size, sha256_file(folder / f.name), st.st_mtime_ns))
    write_manifest(folder, Manifest(repo_id=repo, kind="model", revision="main", commit="", endpoint="https://hub",
                                    staged_at="2026-11-29T00:00:00Z", parts=["tokenizer"], files=entries))
    return folder


@pytest.fixture
def mlm_recipe(write_recipe, hpclaunch, profile, tmp_path) -> Path:
    """A masked-LM recipe (recipes/bert_large's shape) whose model is imported; its tokenizer is org/tok."""
    assert hpclaunch("assets", "import", str(model_folder(tmp_path / "model")), "--model", "org/bert",
                     "--profile", profile).exit_code == 0
    return write_recipe(task="masked-lm", model={"repo": "org/bert"}, tokenizer={"repo": "org/tok"})


def test_a_masked_lm_job_whose_tokenizer_names_no_mask_is_refused_until_it_is_imported_again(
        hpclaunch, profile, store, tmp_path, mlm_recipe):
    folder = staged_by_hand(store, "org/tok", seed_tokenizer(tmp_path / "tokenizer"))
    refused = hpclaunch("submit", str(mlm_recipe), "--profile", profile)
    assert refused.exit_code == 2, refused.output
    message = refused.stderr
    assert "Traceback" not in message
    assert message.startswith(f"hpclaunch: error: the job's tokenizer, model 'org/tok' (revision main) in {folder}, "
                              "has no mask token, which task masked-lm needs")
    assert "it has no tokenizer_config.json or special_tokens_map.json that names one" in message
    assert "its tokenizer.json holds [MASK] (mask_token)" in message
    assert "submitted" not in refused.output

    # the fix it names, run as printed: the folder imported again gets its tokenizer_config.json
    fix = re.search(r"`(hpclaunch assets import [^`]+)`", message)
    assert fix, message
    redone = hpclaunch(*shlex.split(fix[1])[1:])
    assert redone.exit_code == 0, redone.output
    assert "wrote tokenizer_config.json: tokenizer_class PreTrainedTokenizerFast" in redone.stdout
    dry = hpclaunch("submit", str(mlm_recipe), "--profile", profile, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "tokenizer" not in dry.stderr


def test_a_masked_lm_job_with_a_tokenizer_without_any_mask_token_is_told_to_use_another(
        hpclaunch, profile, store, tmp_path, mlm_recipe):
    assert hpclaunch("assets", "import", str(gpt2_tokenizer(tmp_path / "gpt2")), "--model", "org/tok",
                     "--profile", profile).exit_code == 0
    refused = hpclaunch("submit", str(mlm_recipe), "--profile", profile)
    assert refused.exit_code == 2, refused.output
    assert "has no mask token" in refused.stderr
    assert "its tokenizer_config.json names none, nor do the defaults of GPT2Tokenizer" in refused.stderr
    assert "hint: its vocabulary has no such token: use a tokenizer made for masked-lm (tokenizer.repo)" \
        in refused.stderr
    # a dry run says the same as a warning, and a causal-LM job needs no mask token
    assert "has no mask token" in hpclaunch("submit", str(mlm_recipe), "--profile", profile, "--dry-run").stderr
    causal = hpclaunch("submit", str(mlm_recipe), "--profile", profile, "--dry-run", "--set", "task=causal-lm")
    assert causal.exit_code == 0 and "mask token" not in causal.stderr


def test_a_dataset_without_the_train_split_is_refused_and_without_the_eval_split_said(
        hpclaunch, write_recipe, profile, tmp_path):
    recipe = write_recipe(dataset={"repo": "Salesforce/wikitext", "name": "wikitext-2-raw-v1"})
    only_test = _write(tmp_path / "test-only", {"test-00000-of-00001.parquet": "PAR1"})
    assert hpclaunch("assets", "import", str(only_test), "--dataset", "Salesforce/wikitext:wikitext-2-raw-v1",
                     "--profile", profile).exit_code == 0
    refused = hpclaunch("submit", str(recipe), "--profile", profile)
    assert refused.exit_code == 2, refused.output
    assert ("dataset 'Salesforce/wikitext' (revision main, config wikitext-2-raw-v1) in the store has no parquet files "
            "of split 'train', which the job trains on; the splits it has: test") in refused.stderr

    train = _write(tmp_path / "data", {"train-00000-of-00001.parquet": "PAR1"})
    assert hpclaunch("assets", "import", str(train), "--dataset", "Salesforce/wikitext:wikitext-2-raw-v1",
                     "--profile", profile).exit_code == 0
    dry = hpclaunch("submit", str(recipe), "--profile", profile, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert ("hpclaunch: warning: dataset 'Salesforce/wikitext' (config wikitext-2-raw-v1) in the store has no "
            "'validation' split (it has: train): the job trains without evaluation") in dry.stderr
    assert "validation" not in hpclaunch("submit", str(recipe), "--profile", profile, "--dry-run", "--set",
                                         "dataset.eval_split=null").stderr
