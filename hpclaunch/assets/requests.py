"""What to stage: asset requests from recipes and from --model/--dataset, and which repo files they need."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

PARTS = ("config", "weights", "tokenizer")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")

CONFIG_FILES = {"config.json", "generation_config.json"}
TOKENIZER_FILES = {
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "chat_template.jinja",
}
SAFETENSORS = re.compile(
    r"^(model|pytorch_model)(-\d+-of-\d+)?\.safetensors$|^model\.safetensors\.index\.json$"
)
PT_BIN = re.compile(r"^pytorch_model(-\d+-of-\d+)?\.bin$|^pytorch_model\.bin\.index\.json$")


@dataclass(frozen=True)
class AssetRequest:
    kind: str  # model | dataset
    repo_id: str
    revision: str = "main"
    parts: frozenset[str] = field(default_factory=frozenset)  # model parts wanted
    configs: frozenset[str] = field(default_factory=frozenset)  # dataset configs wanted ("" = default)

    @property
    def label(self) -> str:
        extra = (
            ",".join(sorted(self.configs - {""}))
            if self.kind == "dataset"
            else "+".join(p for p in PARTS if p in self.parts)
        )
        return f"{self.kind} {self.repo_id}@{self.revision}" + (f" [{extra}]" if extra else "")

    def cli_arg(self) -> str:
        """The --model/--dataset argument that stages this request."""
        rev = "" if self.revision == "main" else f"@{self.revision}"
        if self.kind == "model":
            return f"--model {self.repo_id}{rev}"
        cfg = next(iter(sorted(self.configs - {""})), "")
        return f"--dataset {self.repo_id}{':' + cfg if cfg else ''}{rev}"


def check_repo(repo: str, where: str) -> str:
    if not _REPO.match(repo):
        raise ConfigError(f"{repo!r} is not a hub repo id such as gpt2 or org/name", key=where)
    return repo


def parse_model(ref: str) -> AssetRequest:
    """``REPO[@REV]`` -> a request for config, weights and tokenizer."""
    repo, _, rev = ref.partition("@")
    return AssetRequest("model", check_repo(repo, "--model"), rev or "main", frozenset(PARTS))


def parse_dataset(ref: str) -> AssetRequest:
    """``REPO[:CONFIG][@REV]`` -> a request for the parquet files of that config."""
    body, _, rev = ref.partition("@")
    repo, _, config = body.partition(":")
    return AssetRequest("dataset", check_repo(repo, "--dataset"), rev or "main", configs=frozenset({config}))


def requests_for_spec(spec: JobSpec) -> list[AssetRequest]:
    """The hub assets a resolved job needs (generate/train/builtin sources are built by the runtime)."""
    r = spec.recipe
    out: list[AssetRequest] = []
    if r.model is not None and r.model.source == "hub" and r.model.repo:
        out.append(AssetRequest("model", r.model.repo, r.model.revision, frozenset({"config", "weights"})))
    if r.tokenizer is not None and r.tokenizer.source == "hub":
        repo = r.tokenizer.repo or (r.model.repo if r.model is not None else None)
        if repo:
            out.append(AssetRequest("model", repo, r.tokenizer.revision, frozenset({"tokenizer"})))
    if r.dataset is not None and r.dataset.source == "hub" and r.dataset.repo:
        out.append(
            AssetRequest(
                "dataset", r.dataset.repo, r.dataset.revision, configs=frozenset({r.dataset.name or ""})
            )
        )
    return merge(out)


def merge(requests: Iterable[AssetRequest]) -> list[AssetRequest]:
    """One request per (kind, repo, revision), with the union of parts and configs, in first-seen order."""
    merged: dict[tuple[str, str, str], AssetRequest] = {}
    for q in requests:
        key = (q.kind, q.repo_id, q.revision)
        if key in merged:
            old = merged[key]
            q = AssetRequest(q.kind, q.repo_id, q.revision, old.parts | q.parts, old.configs | q.configs)
        merged[key] = q
    return list(merged.values())


def select_files(
    kind: str, paths: Sequence[str], parts: Iterable[str] = (), configs: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """(files to fetch, problems). Models: config + weights (safetensors preferred over .bin; never
    .h5/.msgpack/onnx) + tokenizer files at the repo root. Datasets: only the requested configs' parquet."""
    if kind == "model":
        parts = set(parts)
        root = [p for p in paths if "/" not in p]
        chosen = []
        if "config" in parts:
            chosen += [p for p in root if p in CONFIG_FILES]
        if "weights" in parts:
            weights = [p for p in root if SAFETENSORS.match(p)] or [p for p in root if PT_BIN.match(p)]
            chosen += weights
        if "tokenizer" in parts:
            chosen += [p for p in root if p in TOKENIZER_FILES]
        problems = []
        if "weights" in parts and not any(SAFETENSORS.match(p) or PT_BIN.match(p) for p in chosen):
            problems.append("no weights (*.safetensors or pytorch_model*.bin) at the repo root")
        if "config" in parts and "config.json" not in chosen:
            problems.append("no config.json at the repo root")
        return sorted(set(chosen)), problems
    parquet = [p for p in paths if p.endswith(".parquet")]
    available = sorted({p.split("/")[0] for p in parquet if "/" in p and p.split("/")[0] != "data"})
    chosen, problems = [], []
    for cfg in configs:
        if cfg:
            got = [p for p in parquet if p.split("/")[0] == cfg]
        else:
            got = [p for p in parquet if "/" not in p or p.startswith("data/")] or (
                parquet if len(available) <= 1 else []
            )
        if not got:
            problems.append(
                f"no parquet files for config {cfg or '(default)'!r}; configs with parquet "
                f"files: {', '.join(available) or 'none'}"
            )
        chosen += got
    return sorted(set(chosen)), problems
