"""The offline asset store, the face of hpclaunch/assets/: what to stage for recipes (`stage_plan`), staging it
(`stage`, events for progress bars), preparing the datasets, and the store itself (`store_of`, `listed`,
`verify`, `unpack`, `import_files`). The CLI's `stage-assets` and `assets` print these."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.assets.workflow import NothingToStage, StageOutcome, StagePlan, prepare_datasets, stage_assets

if TYPE_CHECKING:
    from hpclaunch.assets.importer import Imported
    from hpclaunch.assets.inventory import AssetCheck
    from hpclaunch.assets.pack import Unpacked

__all__ = ["NothingToStage", "StageOutcome", "StagePlan", "import_files", "listed", "prepare_datasets", "stage",
           "stage_plan", "store_of", "unpack", "verify", "verified"]

stage = stage_assets


def stage_plan(recipes: Sequence[str], profile: str, *, preset: str | None = None, models: Sequence[str] = (),
               datasets: Sequence[str] = (), endpoints: Sequence[str] = ()) -> StagePlan:
    """What the recipes (each resolved on `profile`, with `preset`) and the named models and datasets need in the
    profile's store, from which endpoints; NothingToStage when nothing is named."""
    from hpclaunch.assets.workflow import plan_stage
    from hpclaunch.submission.resolve import CliOverrides, resolve

    specs = [resolve(recipe, profile, CliOverrides(preset=preset)) for recipe in recipes]
    return plan_stage(profile, specs, models=tuple(models), datasets=tuple(datasets), endpoints=tuple(endpoints))


def store_of(profile: str) -> Path:
    """The profile's asset store (assets.store)."""
    from hpclaunch.assets.inventory import profile_store

    return profile_store(profile)


def listed(profile: str) -> tuple[Path, list[dict[str, Any]]]:
    """The store and what is in it: kind, repo, revision, commit, parts or configs, files, bytes, source, time."""
    from hpclaunch.assets.inventory import list_assets

    store = store_of(profile)
    return store, list_assets(store)


def verify(profile: str) -> Iterator[AssetCheck]:
    """Each staged asset's files hashed again (sha256), one check per asset as it is done."""
    from hpclaunch.assets.inventory import verify_store

    return verify_store(store_of(profile))


def verified(profile: str, checks: Sequence[AssetCheck]) -> None:
    """An AssetError naming each missing or corrupt file of `checks` (exit 2); nothing when all are whole."""
    from hpclaunch.assets.inventory import raise_for_problems

    raise_for_problems(store_of(profile), list(checks), profile)


def unpack(archive: Path, profile: str) -> list[Unpacked]:
    """A tar written by `stage-assets --pack` unpacked into the profile's store, every file verified."""
    from hpclaunch.assets.pack import unpack as unpack_into

    return unpack_into(archive, store_of(profile))


def import_files(path: Path, profile: str, kind: str, repo_id: str, revision: str,
                 config: str | None = None) -> Imported:
    """Files downloaded by hand copied into the store with a manifest, as if staged (a dataset's under `config`/);
    the parts or configs of the asset already there that they do not bring are kept."""
    from hpclaunch.assets.importer import import_asset

    return import_asset(path, store_of(profile), kind, repo_id, revision, config)
