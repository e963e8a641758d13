"""Tiny repos for the test hub: a synthetic model, a real loadable GPT-2, a dataset with two configs."""

from __future__ import annotations

import json
import os
from pathlib import Path


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def synthetic_model(root: Path, repo_id: str = "tiny-org/tiny-model", weight_bytes: int = 300_000) -> Path:
    """A model repo with the files a real one has, including ones stage-assets must skip."""
    folder = root / "models" / repo_id.replace("/", "--")
    rnd = os.urandom(weight_bytes)
    _write(folder / "config.json", json.dumps({"model_type": "gpt2", "n_layer": 1}))
    _write(folder / "generation_config.json", "{}")
    _write(folder / "model.safetensors", rnd)
    _write(folder / "pytorch_model.bin", rnd[::-1])  # skipped: safetensors preferred
    _write(folder / "tf_model.h5", os.urandom(70_000))  # skipped
    _write(folder / "flax_model.msgpack", os.urandom(70_000))  # skipped
    _write(folder / "onnx" / "model.onnx", os.urandom(1000))  # skipped
    _write(folder / "tokenizer.json", json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
    _write(folder / "vocab.json", json.dumps({"a": 0, "b": 1}))
    _write(folder / "merges.txt", "#version: 0.2\na b\n")
    _write(folder / "README.md", "# tiny\n")
    return folder


def bin_only_model(root: Path, repo_id: str = "tiny-org/bin-model") -> Path:
    folder = root / "models" / repo_id.replace("/", "--")
    _write(folder / "config.json", "{}")
    _write(folder / "pytorch_model.bin", os.urandom(100_000))
    _write(folder / "tf_model.h5", os.urandom(100_000))
    return folder


def dataset(root: Path, repo_id: str = "tiny-org/tiny-text") -> Path:
    """A dataset repo with configs small-v1 and big-v1 (parquet) and a script file to skip."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = root / "datasets" / repo_id.replace("/", "--")
    for cfg, n in (("small-v1", 50), ("big-v1", 500)):
        for split in ("train", "validation", "test"):
            p = folder / cfg / f"{split}-00000-of-00001.parquet"
            p.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"text": [f"{cfg} {split} line {i}" for i in range(n)]}), p)
    _write(folder / "README.md", "# tiny text\n")
    _write(folder / "tiny-text.py", "# a loading script: never staged\n")
    return folder


def gpt2_model(root: Path, repo_id: str = "tiny-org/gpt2-tiny") -> Path:
    """A real GPT-2 (2 layers, hidden 32) with a BPE tokenizer trained here: loads with from_pretrained."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    folder = root / "models" / repo_id.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<|endoftext|>"])
    tok.train_from_iterator(["to be or not to be that is the question"] * 50, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    fast.save_pretrained(folder)
    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=len(fast))
    GPT2LMHeadModel(cfg).save_pretrained(folder)  # model.safetensors + config.json
    return folder
