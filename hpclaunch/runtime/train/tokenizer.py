"""The job's tokenizer: trained once for the `tiny` presets and cached in the store, or the staged hub one.

A rank whose tokenized data the store already holds never tokenizes: it needs the tokenizer's size (a key of the
data cache, read with the `tokenizers` library from tokenizer.json, milliseconds) and, on rank 0, a copy of its
files for `hpclaunch export`. `LazyTokenizer` is that: the folder, loaded through transformers only when a text is
tokenized (a cold store: rank 0 preparing the data).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.runtime.train.assets import fingerprint, generated, hub_asset, job_store
from hpclaunch.runtime.train.corpus import builtin_corpus

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.runtime.train.distributed import Dist

_BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_EOS = "<|endoftext|>"


def _train_tokenizer(kind: str, vocab_size: int, texts: list[str], out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "wordpiece":  # BERT-style, uncased
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(
            texts,
            trainers.WordPieceTrainer(
                vocab_size=vocab_size, special_tokens=_BERT_SPECIALS, show_progress=False
            ),
        )
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
        )
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    else:  # GPT-2-style byte-level BPE; every record ends with the end-of-text token
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(
            texts,
            trainers.BpeTrainer(
                vocab_size=vocab_size,
                special_tokens=[_EOS],
                show_progress=False,
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            ),
        )
        eos = tok.token_to_id(_EOS)
        tok.post_processor = processors.TemplateProcessing(single=f"$A {_EOS}", special_tokens=[(_EOS, eos)])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=_EOS, eos_token=_EOS, unk_token=_EOS)
    fast.save_pretrained(out)
    # transformers 5 names its class TokenizersBackend, which 4.x cannot load: the name both load (the store is
    # shared by jobs whose environments may have either)
    config = out / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "tokenizer_class": "PreTrainedTokenizerFast"},
                                 indent=2))


def tokenizer_path(spec: JobSpec, d: Dist) -> Path:
    """The tokenizer's folder: trained once by rank 0 and cached in the store, or the staged hub one."""
    t = spec.recipe.tokenizer
    if t is not None and t.source == "train":
        corpus = spec.recipe.dataset.corpus if spec.recipe.dataset else None
        if not corpus:
            raise ValueError("tokenizer.source: train needs dataset.source: builtin with a corpus")
        key = fingerprint("tokenizer", t.kind, t.vocab_size, corpus, 2)  # 2: loadable by transformers 4 and 5
        return generated(
            job_store(spec),
            "tokenizers",
            key,
            lambda out: _train_tokenizer(t.kind, t.vocab_size, builtin_corpus(corpus)["train"], out),
            d,
        )
    repo = (t.repo if t and t.repo else None) or spec.recipe.model.repo if spec.recipe.model else None
    assert repo is not None, "no tokenizer.repo and no model.repo"
    return hub_asset(spec, "model", repo, t.revision if t else "main")


def load_tokenizer(spec: JobSpec, d: Dist) -> tuple[PreTrainedTokenizerBase, str]:
    """(tokenizer, where it came from)."""
    from transformers import AutoTokenizer

    path = tokenizer_path(spec, d)
    return AutoTokenizer.from_pretrained(path), str(path)


#: the files of a tokenizer in a hub folder or a save_pretrained one (a model folder also holds weights)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "merges.txt", "vocab.txt", "spiece.model", "tokenizer.model", "chat_template.jinja")


class LazyTokenizer:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._loaded: PreTrainedTokenizerBase | None = None
        self._size: int | None = None

    def loaded(self) -> PreTrainedTokenizerBase:
        """transformers' tokenizer of the folder (imported and loaded on the first call)."""
        if self._loaded is None:
            from transformers import AutoTokenizer

            self._loaded = AutoTokenizer.from_pretrained(self.path)
        return self._loaded

    def __len__(self) -> int:
        """The vocabulary with the added tokens (what len() of transformers' tokenizer counts); from tokenizer.json
        where the folder has one, whether or not the tokenizer was loaded, so the same folder always counts the same."""
        if self._size is None:
            fast = self.path / "tokenizer.json"
            if fast.is_file():
                from tokenizers import Tokenizer

                self._size = Tokenizer.from_file(str(fast)).get_vocab_size(with_added_tokens=True)
            else:
                self._size = len(self.loaded())
        return self._size

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.loaded()(*args, **kwargs)

    def save_pretrained(self, folder: str | Path) -> None:
        """The tokenizer's own files copied into `folder` (what transformers' AutoTokenizer loads)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        for name in TOKENIZER_FILES:
            if (self.path / name).is_file():
                shutil.copyfile(self.path / name, out / name)
