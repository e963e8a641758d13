"""The `stage-assets` workflow as a library: what to stage (from recipes, models, datasets), where from
(endpoints) and into which store; staging it here or inside a Slurm job; packing it; preparing the
recipes' datasets. Nothing here prints: progress comes through callbacks, results as objects.

    specs = [resolve("recipes/gpt2", "guangzhou-a800", CliOverrides(preset="tiny"))]   # hpclaunch.submission.resolve
    plan = plan_stage("guangzhou-a800", specs, models=["gpt2@main"])
    outcome = stage_assets(plan, pack_file=Path("assets.tar"))
    outcome.check()                      # AssetError naming every asset that failed
    for done in prepare_datasets(plan):  # tokenize each recipe's dataset into the store, offline
        print(done["recipe"], done["blocks"])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.assets import overssh
from hpclaunch.assets.requests import AssetRequest, merge, parse_dataset, parse_model, requests_for_spec
from hpclaunch.assets.stage import Event, StageResult, endpoints_for, stage_many
from hpclaunch.assets.store import store_root
from hpclaunch.config.profile import asset_store
from hpclaunch.errors import AssetError, HpclaunchError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec


class NothingToStage(HpclaunchError):
    """Neither a recipe nor a model nor a dataset was asked for."""


@dataclass(frozen=True)
class StagePlan:
    """What `stage_assets` will stage: the requests (one per repo and revision), the endpoints in the
    order they are tried, the store, and the resolved recipes (whose datasets `prepare_datasets` prepares)."""

    store: Path
    requests: tuple[AssetRequest, ...]
    endpoints: tuple[str, ...]
    specs: tuple[JobSpec, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. a recipe that needs no hub assets
    # a profile with remote: (docs/remote.md): `store` is an outbox here, copied to `login_store` there
    remote: dict[str, Any] | None = None
    login_store: str | None = None


def plan_stage(profile: str, specs: Sequence[JobSpec] = (), *, models: Sequence[str] = (),
               datasets: Sequence[str] = (), endpoints: Sequence[str] = ()) -> StagePlan:
    """The assets the resolved recipes `specs` need, plus `models` (``REPO[@REV]``) and `datasets`
    (``REPO[:CONFIG][@REV]``), merged; `endpoints` replace the profile's mirror and fallbacks.
    Raises NothingToStage when nothing at all was asked for."""
    from hpclaunch.config.loader import load_profile

    prof = load_profile(profile)
    wanted: list[AssetRequest] = []
    notes: list[str] = []
    for spec in specs:
        found = requests_for_spec(spec)
        if not found:
            notes.append(f"recipe {spec.recipe.name} (preset {spec.preset or 'none'}) needs no hub assets")
        wanted += found
    wanted += [parse_model(m) for m in models] + [parse_dataset(d) for d in datasets]
    if not wanted and not specs:
        raise NothingToStage("nothing to stage: give a RECIPE, --model or --dataset")
    urls = endpoints_for(endpoints, prof.assets.mirror, prof.assets.endpoints)
    if prof.remote is not None:  # staged here (where the network is), then copied to the login node's store
        return StagePlan(overssh.outbox(prof.remote.host), tuple(merge(wanted)), tuple(urls), tuple(specs),
                         tuple(notes),
                         {f: getattr(prof.remote, f) for f in ("host", "user", "port", "identity", "known_hosts")},
                         asset_store(prof))
    return StagePlan(store_root(asset_store(prof)), tuple(merge(wanted)), tuple(urls), tuple(specs), tuple(notes))


@dataclass
class StageOutcome:
    """What `stage_assets` did: an entry per asset staged or already present, a message per asset that
    failed, and the archive written (none when an asset failed)."""

    plan: StagePlan
    results: list[StageResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    host: str | None = None  # the node that staged (with a Slurm partition); None: this process
    pack_file: Path | None = None
    packed_bytes: int | None = None

    @property
    def staged(self) -> list[StageResult]:
        return [r for r in self.results if r.status == "staged"]

    @property
    def skipped(self) -> list[StageResult]:
        """Complete in the store already: nothing fetched."""
        return [r for r in self.results if r.status != "staged"]

    @property
    def downloaded_bytes(self) -> int:
        return sum(r.downloaded_bytes for r in self.staged)

    def to_json(self) -> dict[str, Any]:
        return {
            "store": str(self.plan.store),
            "host": self.host,
            "endpoints": list(self.plan.endpoints),
            "seconds": round(self.seconds, 3),
            "assets": [r.to_json() for r in self.results],
            "errors": self.errors,
            "pack": str(self.pack_file) if self.pack_file is not None else None,
        }

    def check(self) -> None:
        """Raise AssetError when any asset failed (one message, or a count and every message)."""
        if self.errors:
            raise AssetError(self.errors[0] if len(self.errors) == 1
                             else f"{len(self.errors)} assets failed:\n" + "\n".join(self.errors))


def stage_assets(plan: StagePlan, *, workers: int = 8, verify: bool = False, timeout: float = 10.0,
                 slurm_partition: str | None = None, pack_file: Path | None = None,
                 on_event: Event | None = None,
                 on_submit: Callable[[str], None] | None = None) -> StageOutcome:
    """Stage every request of `plan` into its store, here (`on_event` sees each download event) or inside
    a Slurm job on `slurm_partition` through submitit (`on_submit` gets its job id; this call waits).
    When every asset is staged and `pack_file` is given, write them and their manifests to that tar.
    An asset that fails does not stop the others: see `StageOutcome.errors` and `StageOutcome.check`."""
    t0 = time.monotonic()
    host = None
    if plan.remote is not None and slurm_partition:
        raise AssetError("--slurm-partition stages inside a job on the cluster: not with a profile that submits over "
                         "SSH (remote:), which stages here and copies the assets to the login node",
                         hint="leave out --slurm-partition")
    if slurm_partition:
        from hpclaunch.assets.remote import stage_via_slurm
        from hpclaunch.core.paths import hpclaunch_home

        results, errors, host = stage_via_slurm(
            plan.requests, plan.store, plan.endpoints, partition=slurm_partition,
            folder=hpclaunch_home() / "staging", workers=workers, verify=verify, timeout=timeout,
            on_submit=on_submit)
    else:
        results, errors = stage_many(plan.requests, plan.store, plan.endpoints, workers=workers, verify=verify,
                                     timeout=timeout, on_event=on_event)
    if plan.remote is not None and not errors:
        host = overssh.send(plan.remote, plan.store, plan.login_store, [r.path for r in results])
    outcome = StageOutcome(plan, results, errors, time.monotonic() - t0, host)
    if pack_file is not None and not errors:
        from hpclaunch.assets.pack import pack

        outcome.packed_bytes = pack(plan.store, [r.path for r in results], pack_file)
        outcome.pack_file = pack_file
    return outcome


def stage_config(spec: JobSpec, endpoints: Sequence[str] = (), *, timeout: float = 10.0) -> StageResult | None:
    """The config.json of the job's hub model into its profile's store, when the store lacks it: that file alone
    (and generation_config.json), from `endpoints` (default: the profile's mirror, then its endpoints), its
    manifest's parts ``[config]`` (plus what the store held), so preflight still refuses the job until its
    weights are staged. None when there is nothing to fetch (no hub model, or its config is staged). Raises
    stage.Unreachable when no endpoint answered, AssetError for any other failure."""
    from hpclaunch.assets.stage import stage_one
    from hpclaunch.assets.store import asset_path

    m = spec.recipe.model
    if m is None or m.source != "hub" or not m.repo:
        return None
    prof = spec.profile
    store = store_root(asset_store(prof))
    if (asset_path(store, "model", m.repo, m.revision) / "config.json").is_file():
        return None
    urls = endpoints_for(endpoints, prof.assets.mirror, prof.assets.endpoints)
    return stage_one(AssetRequest("model", m.repo, m.revision, frozenset({"config"})), store, urls, timeout=timeout)


def prepare_datasets(plan: StagePlan) -> Iterator[dict[str, Any]]:
    """Tokenize and group the dataset of each recipe of `plan` into its store (offline; a no-op where the
    cache is there already), yielding what each preparation reports as it finishes."""
    from hpclaunch.assets.prepare import prepare_data

    if plan.remote is not None:
        raise AssetError("--prepare tokenizes into the store: not yet over SSH (remote:), whose store is on the login "
                         "node", hint="run `hpclaunch stage-assets RECIPE --prepare` on the login node")
    for spec in plan.specs:
        if spec.recipe.dataset is not None:
            yield prepare_data(spec, plan.store)
