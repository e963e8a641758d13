"""What a tokenizer's files hold, read with the standard library (the CLI never imports transformers): its kind, its
vocabulary, the special tokens its files name, and those its vocabulary holds by convention.

A tokenizer downloaded by hand often comes without tokenizer_config.json (seed 002: tokenizer.json and vocab.txt
only). transformers then loads it with no special tokens at all (no mask token: a masked-LM job dies at its first
step), or, without a config.json beside it, not at all (4.x: "Unrecognized model"). Yet a BERT WordPiece vocabulary
holds [CLS] [SEP] [PAD] [MASK] [UNK] whatever the files say. `assets import` writes the tokenizer_config.json that
names them (`completed_config`), so the folder in the store loads the same everywhere (the recipes, a user's own
`AutoTokenizer.from_pretrained`, `hpclaunch export`); preflight checks that a job's tokenizer has what its task
needs (`missing_for`) before anything is queued.

May import: errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hpclaunch.assets.requests import TOKENIZER_FILES
from hpclaunch.errors import AssetError

ROLES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
CONFIG = "tokenizer_config.json"
_SPECIALS_MAP = "special_tokens_map.json"

_BERT = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
         "mask_token": "[MASK]"}
_ROBERTA = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
            "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"}
_GPT2 = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
_SENTENCEPIECE = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

#: (tokens whose presence in the vocabulary identifies the convention, the roles' tokens), first match wins
CONVENTIONS = ((("[CLS]", "[SEP]"), _BERT), (("<s>", "</s>", "<mask>"), _ROBERTA), (("<|endoftext|>",), _GPT2),
               (("<s>", "</s>"), _SENTENCEPIECE))
#: the special tokens transformers' tokenizer classes default to when the files name none, by model type (from
#: tokenizer_class, BertTokenizerFast -> bert, or from the model's config.json beside the tokenizer)
CLASS_DEFAULTS = {"bert": _BERT, "distilbert": _BERT, "electra": _BERT, "roberta": _ROBERTA,
                  "xlm-roberta": _ROBERTA, "xlmroberta": _ROBERTA, "gpt2": _GPT2}
#: the files read_tokenizer reads (all small but a vocabulary: a few MB at most)
READ = ("tokenizer.json", "vocab.txt", "vocab.json", "added_tokens.json", CONFIG, _SPECIALS_MAP, "config.json")
#: what each recipe task needs of its tokenizer, and why (the recipes pack text into full blocks: no padding)
NEEDS = {"masked-lm": {"mask_token": "the masking puts it in place of the chosen tokens"}}


@dataclass(frozen=True)
class TokenizerFiles:
    """A folder's tokenizer, as its files describe it."""

    folder: Path
    files: tuple[str, ...]  # the tokenizer files present at the folder's top level
    kind: str  # wordpiece, bpe, unigram, wordlevel, sentencepiece, or unknown
    vocab: frozenset[str] | None  # None: no vocabulary readable here (a SentencePiece model alone)
    vocab_file: str | None
    declared: dict[str, str | None] = field(default_factory=dict)  # role -> token the files name (None: "none")
    declared_in: dict[str, str] = field(default_factory=dict)  # role -> the file that names it
    tokenizer_class: str | None = None
    model_type: str | None = None  # of the config.json beside the tokenizer (a model folder)

    def defaults(self) -> dict[str, str]:
        """The special tokens of the class transformers picks, where the files name none."""
        if self.tokenizer_class:
            name = self.tokenizer_class.removesuffix("Fast").removesuffix("Tokenizer").lower()
            return dict(CLASS_DEFAULTS.get(name, {}))
        return dict(CLASS_DEFAULTS.get(self.model_type or "", {}))

    def effective(self) -> dict[str, str]:
        """The special tokens transformers loads this tokenizer with."""
        merged: dict[str, str | None] = {**self.defaults(), **self.declared}
        return {role: tok for role, tok in merged.items() if tok}

    def conventional(self) -> dict[str, str]:
        """The special tokens the vocabulary holds by convention (BERT's [MASK] in vocab.txt, ...)."""
        if self.vocab is None:
            return {}
        for marks, roles in CONVENTIONS:
            if all(m in self.vocab for m in marks):
                return {role: tok for role, tok in roles.items() if tok in self.vocab}
        return {}

    def where(self, role: str) -> str:
        """Which file makes `role` what effective() says."""
        if role in self.declared_in:
            return self.declared_in[role]
        return f"the defaults of {self.tokenizer_class or f'model type {self.model_type}'}"


def _json(folder: Path, name: str) -> dict:
    path = folder / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AssetError(f"{path} is not a readable JSON file ({exc}): transformers could not load this tokenizer",
                         hint="download the file again (a mirror's error page saved under its name looks like "
                              "this)") from None
    if not isinstance(data, dict):
        raise AssetError(f"{path} holds a JSON {type(data).__name__}, not an object: not a tokenizer file",
                         hint="download the file again")
    return data


def _token(value: object) -> str | None:
    """A special token as the files write it: "[MASK]" or {"content": "[MASK]", ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _vocab(folder: Path, present: set[str]) -> tuple[str, frozenset[str] | None, str | None]:
    """(kind, vocabulary with the added tokens, the file it came from)."""
    added: set[str] = set()
    if "added_tokens.json" in present:
        added = set(_json(folder, "added_tokens.json"))
    if "tokenizer.json" in present:
        data = _json(folder, "tokenizer.json")
        model = data["model"] if isinstance(data.get("model"), dict) else {}
        raw = model.get("vocab")
        words = set(raw) if isinstance(raw, dict) else {w[0] for w in raw or () if isinstance(w, list) and w}
        added |= {t["content"] for t in data.get("added_tokens") or () if isinstance(t, dict) and "content" in t}
        return str(model.get("type") or "unknown").lower(), frozenset(words | added), "tokenizer.json"
    if "vocab.txt" in present:
        lines = (folder / "vocab.txt").read_text(encoding="utf-8", errors="replace").splitlines()
        return "wordpiece", frozenset({w.strip() for w in lines if w.strip()} | added), "vocab.txt"
    if "vocab.json" in present:
        return "bpe", frozenset(set(_json(folder, "vocab.json")) | added), "vocab.json"
    if present & {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model"}:
        return "sentencepiece", None, None
    return "unknown", None, None


def read_tokenizer(folder: Path, files: tuple[str, ...] | None = None) -> TokenizerFiles:
    """What the tokenizer files at the top level of `folder` hold. An AssetError names a file that is not JSON."""
    present = {p.name for p in folder.iterdir() if p.is_file()} if files is None else set(files)
    tok_files = tuple(sorted(present & TOKENIZER_FILES))
    kind, vocab, vocab_file = _vocab(folder, present)
    declared: dict[str, str | None] = {}
    declared_in: dict[str, str] = {}
    tokenizer_class = None
    for name in (CONFIG, _SPECIALS_MAP):  # special_tokens_map.json is read after, and wins, as transformers does
        if name not in present:
            continue
        data = _json(folder, name)
        if name == CONFIG and isinstance(data.get("tokenizer_class"), str):
            tokenizer_class = data["tokenizer_class"]
        for role in ROLES:
            if role in data:
                declared[role], declared_in[role] = _token(data[role]), name
    model_type = None
    if "config.json" in present:
        try:
            model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError):
            model_type = None  # the model's config is the model check's business, not the tokenizer's
    return TokenizerFiles(folder, tok_files, kind, vocab, vocab_file, declared, declared_in, tokenizer_class,
                          model_type if isinstance(model_type, str) else None)


def _tokenizer_class(info: TokenizerFiles) -> str | None:
    """The class to name for files that name none: the tokenizer.json as it is, else the slow class of the
    vocabulary's convention. Both load with transformers 4 and 5."""
    if "tokenizer.json" in info.files:
        return "PreTrainedTokenizerFast"
    roles = info.conventional()
    if info.kind == "wordpiece" and roles.get("cls_token") == "[CLS]":
        return "BertTokenizer"
    if info.kind == "bpe" and "merges.txt" in info.files:
        return "RobertaTokenizer" if roles.get("mask_token") == "<mask>" else "GPT2Tokenizer"
    return None


@dataclass(frozen=True)
class Completion:
    """What `assets import` adds to tokenizer_config.json, and the file's whole new content."""

    added: dict[str, object]
    content: dict[str, object]

    def describe(self, info: TokenizerFiles) -> str:
        tokens = " ".join(str(v) for k, v in self.added.items() if k in ROLES)
        parts = []
        if "tokenizer_class" in self.added:
            parts.append(f"tokenizer_class {self.added['tokenizer_class']}")
        if tokens:
            parts.append(f"the special tokens {tokens} (found in {info.vocab_file})")
        how = "added to" if CONFIG in info.files else "wrote"
        return f"{how} {CONFIG}: " + ", ".join(parts)


def completed_config(info: TokenizerFiles) -> Completion | None:
    """The tokenizer_config.json that names what the files leave out: the class to load (when neither the files nor
    a model's config.json beside them say it) and each special token the vocabulary holds by convention but no file
    names. The source's own keys are kept. None when the files already say everything."""
    current: dict[str, object] = _json(info.folder, CONFIG) if CONFIG in info.files else {}
    added: dict[str, object] = {}
    if not info.tokenizer_class and not info.model_type:  # a config.json beside it tells transformers the class
        cls = _tokenizer_class(info)
        if cls:
            added["tokenizer_class"] = cls
            if cls == "BertTokenizer" and "do_lower_case" not in current and info.vocab is not None:
                plain = [w for w in info.vocab if not (w.startswith("[") and w.endswith("]"))]
                added["do_lower_case"] = not any(ch.isupper() for w in plain for ch in w)
    for role, tok in info.conventional().items():
        if role not in info.declared:
            added[role] = tok
    if not added:
        return None
    return Completion(added, {**current, **added})


def missing_for(task: str, info: TokenizerFiles) -> list[tuple[str, str]]:
    """(role, why the task needs it) for each special token `task` needs that the tokenizer loads without."""
    have = info.effective()
    return [(role, why) for role, why in NEEDS.get(task, {}).items() if role not in have]
