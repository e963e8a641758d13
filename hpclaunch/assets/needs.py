"""What a job needs of its staged assets' contents, checked before it is queued (rule 11 of the design), from the
files and manifests alone (no transformers, no pyarrow): the special tokens its task needs of its tokenizer (a mask
token for masked-lm), and its dataset's splits (the train split must be there; an eval split that is not means no
evaluation, said at submit). The staged-assets check (check.py) has made sure the files are there first.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from hpclaunch.assets.store import Manifest, asset_path, read_manifest, split_files, store_root
from hpclaunch.assets.tokenizer_files import CONFIG, NEEDS, read_tokenizer
from hpclaunch.assets.tokenizer_files import missing_for as missing_tokens
from hpclaunch.config.profile import asset_store
from hpclaunch.errors import AssetError

if TYPE_CHECKING:
    from pathlib import Path

    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.recipe import DatasetSpec


def _staged(spec: JobSpec, kind: str, repo: str, revision: str) -> tuple[Path, Manifest] | None:
    folder = asset_path(store_root(asset_store(spec.profile)), kind, repo, revision)
    manifest = read_manifest(folder)
    return (folder, manifest) if manifest is not None else None


def checked_tokenizer(spec: JobSpec) -> tuple[str, str] | None:
    """The (repo, revision) of the hub tokenizer the job loads, where its task needs special tokens of it (the model's
    folder when tokenizer.repo is not set, as the job looks)."""
    r = spec.recipe
    t = r.tokenizer
    if (t is not None and t.source != "hub") or r.task not in NEEDS:
        return None
    repo = (t.repo if t is not None and t.repo else None) or (r.model.repo if r.model is not None else None)
    return (repo, t.revision if t is not None else "main") if repo else None


def check_tokenizer(spec: JobSpec) -> None:
    """An AssetError when the job's staged tokenizer loads without a special token its task needs: which
    tokenizer, which files were read, what is missing, and what to do."""
    wanted = checked_tokenizer(spec)
    staged = _staged(spec, "model", *wanted) if wanted else None
    if wanted is None or staged is None or "tokenizer" not in staged[1].parts:
        return  # not staged: the staged-assets check says so
    (repo, revision), (folder, _), r = wanted, staged, spec.recipe
    info = read_tokenizer(folder)
    missing = missing_tokens(r.task, info)
    if not missing:
        return
    what = f"model {repo!r} (revision {revision})"
    named = [n for n in info.files if n in (CONFIG, "special_tokens_map.json")]
    files = (f"its {' and '.join(named)} name{'s' * (len(named) == 1)} none" if named
             else f"it has no {CONFIG} or special_tokens_map.json that names one")
    lacks = "; ".join(f"no {role.replace('_', ' ')}, which task {r.task} needs ({why})" for role, why in missing)
    found = {role: info.conventional().get(role) for role, _ in missing}
    held = [f"{tok} ({role})" for role, tok in found.items() if tok]
    defaults = info.tokenizer_class or info.model_type
    message = (f"the job's tokenizer, {what} in {folder}, has {lacks}: {files}"
               + (f", nor do the defaults of {defaults}" if defaults else ""))
    if held:
        hint = (f"its {info.vocab_file} holds {', '.join(held)}: import the folder again, which writes the "
                f"{CONFIG} that names it: `hpclaunch assets import {folder} --model {repo} --profile "
                f"{spec.profile_arg}`")
    else:
        hint = (f"its vocabulary has no such token: use a tokenizer made for {r.task} (tokenizer.repo), or add the "
                f"token to the files ({CONFIG}: \"mask_token\") and import them again with `hpclaunch assets import "
                f"FOLDER --model {repo} --profile {spec.profile_arg}`")
    raise AssetError(message, hint=hint)


def _dataset(spec: JobSpec) -> tuple[DatasetSpec, Manifest] | None:
    ds = spec.recipe.dataset
    if ds is None or ds.source != "hub" or not ds.repo:
        return None
    staged = _staged(spec, "dataset", ds.repo, ds.revision)
    return (ds, staged[1]) if staged is not None else None


def _splits(manifest: Manifest, config: str | None) -> list[str]:
    """The splits a staged dataset config has, by its files' names (train-00000-of-00001.parquet: train)."""
    paths = [f.path for f in manifest.files if f.path.endswith(".parquet")]
    inside = [p for p in paths if config and p.startswith(f"{config}/")] or paths
    names = {PurePosixPath(p).name.split("-")[0].split(".")[0] for p in inside}
    return sorted(names)


def check_splits(spec: JobSpec) -> None:
    """An AssetError when the staged dataset has no files of the split the job trains on."""
    found = _dataset(spec)
    if found is None:
        return
    ds, manifest = found
    if split_files((f.path for f in manifest.files), ds.name, ds.train_split):
        return
    has = ", ".join(_splits(manifest, ds.name)) or "none"
    raise AssetError(
        f"dataset {ds.repo!r} (revision {ds.revision}, config {ds.name or '(default)'}) in the store has no parquet "
        f"files of split {ds.train_split!r}, which the job trains on; the splits it has: {has}",
        hint="set dataset.train_split to one of them (--set dataset.train_split=NAME), or import that split's files "
             "(its files are named SPLIT-00000-of-0000N.parquet)")


def eval_split_notes(spec: JobSpec) -> list[str]:
    """A note when the staged dataset has no files of the eval split: the job trains without evaluation."""
    found = _dataset(spec)
    if found is None:
        return []
    ds, manifest = found
    if ds.eval_split is None or split_files((f.path for f in manifest.files), ds.name, ds.eval_split):
        return []
    has = ", ".join(_splits(manifest, ds.name)) or "none"
    return [f"dataset {ds.repo!r} (config {ds.name or '(default)'}) in the store has no {ds.eval_split!r} split "
            f"(it has: {has}): the job trains without evaluation (dataset.eval_split: null says so; import the "
            f"split's parquet files to evaluate)"]
