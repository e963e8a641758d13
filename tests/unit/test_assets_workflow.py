"""The staging workflow called from Python (no click): planning, an asset already in the store, packing,
a failing endpoint, and the store inventory."""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch.assets.inventory import list_assets, raise_for_problems, verify_store
from hpclaunch.assets.requests import PARTS, AssetRequest
from hpclaunch.assets.store import FileEntry, Manifest, asset_path, write_manifest
from hpclaunch.assets.workflow import NothingToStage, StagePlan, plan_stage, prepare_datasets, stage_assets
from hpclaunch.errors import AssetError
from hpclaunch.submission.resolve import resolve

DEAD = "http://127.0.0.1:9"  # the discard port: connection refused


@pytest.fixture
def profile(write_profile: Callable[..., Path], tmp_path: Path) -> str:
    assets = {"store": str(tmp_path / "store"), "mirror": "https://mirror.example/", "endpoints": [DEAD]}
    return str(write_profile(assets=assets))


def _staged_model(store: Path, repo: str = "org/tiny") -> Path:
    """A complete model in the store, as stage-assets leaves it."""
    folder = asset_path(store, "model", repo)
    folder.mkdir(parents=True)
    data = b'{"n_layer": 1}'
    (folder / "config.json").write_bytes(data)
    entry = FileEntry("config.json", len(data), hashlib.sha256(data).hexdigest(),
                      (folder / "config.json").stat().st_mtime_ns)
    write_manifest(folder, Manifest(repo, "model", "main", "abc123", DEAD, "2026-01-01T00:00:00", sorted(PARTS),
                                    [], [entry]))
    return folder


def test_plan_merges_requests_and_orders_endpoints(profile: str, tmp_path: Path) -> None:
    plan = plan_stage(profile, models=["org/tiny", "org/tiny@main"], datasets=["org/data:small@v1"])
    assert plan.store == tmp_path / "store"
    assert [q.label for q in plan.requests] == ["model org/tiny@main [config+weights+tokenizer]",
                                                "dataset org/data@v1 [small]"]
    assert plan.endpoints == ("https://mirror.example", DEAD)
    assert plan_stage(profile, models=["org/tiny"], endpoints=["http://a/"]).endpoints == ("http://a",)


def test_nothing_asked_for_and_a_recipe_without_hub_assets(
    profile: str, write_recipe: Callable[..., Path]
) -> None:
    with pytest.raises(NothingToStage, match="nothing to stage"):
        plan_stage(profile)
    plan = plan_stage(profile, [resolve(str(write_recipe()), profile)])
    assert plan.requests == () and len(plan.specs) == 1
    assert plan.notes == ("recipe testrecipe (preset none) needs no hub assets",)
    assert list(prepare_datasets(plan)) == []  # no dataset to prepare


def test_an_asset_in_the_store_is_skipped_and_packed(profile: str, tmp_path: Path) -> None:
    plan = plan_stage(profile, models=["org/tiny"])
    folder = _staged_model(plan.store)
    outcome = stage_assets(plan, pack_file=tmp_path / "assets.tar")
    assert outcome.errors == [] and outcome.staged == []
    assert [r.path for r in outcome.skipped] == [folder] and outcome.skipped[0].status == "present"
    assert outcome.packed_bytes == len(b'{"n_layer": 1}')
    with tarfile.open(tmp_path / "assets.tar") as tar:
        assert "models/org--tiny/main/config.json" in tar.getnames()
    data = outcome.to_json()
    assert data["pack"] == str(tmp_path / "assets.tar") and data["assets"][0]["status"] == "present"
    outcome.check()  # nothing failed


def test_a_failing_asset_is_reported_not_packed(profile: str, tmp_path: Path) -> None:
    plan = StagePlan(tmp_path / "store", (AssetRequest("model", "org/absent", parts=frozenset(PARTS)),), (DEAD,))
    outcome = stage_assets(plan, timeout=1, pack_file=tmp_path / "assets.tar")
    assert outcome.results == [] and len(outcome.errors) == 1
    assert "no endpoint reachable" in outcome.errors[0]
    assert outcome.pack_file is None and not (tmp_path / "assets.tar").exists()
    with pytest.raises(AssetError, match="no endpoint reachable"):
        outcome.check()


def test_inventory_lists_and_verifies(tmp_path: Path) -> None:
    store = tmp_path / "store"
    folder = _staged_model(store)
    (asset_path(store, "model", "org/half")).mkdir(parents=True)
    listed = list_assets(store)
    assert [(i.get("repo_id"), i["state"]) for i in listed] == [(None, "no manifest (incomplete)"),
                                                                 ("org/tiny", "staged")]
    (folder / "config.json").write_bytes(b'{"n_layer": 2}')  # same size, other bytes
    checks = list(verify_store(store))
    assert [c.ok for c in checks] == [False, False]
    assert checks[1].to_json()["problems"][0].endswith("corrupt (sha256 is not the manifest's "
                                                       f"{checks[1].manifest.files[0].sha256[:12]})")
    with pytest.raises(AssetError, match=r"2 problem\(s\) in the asset store") as found:
        raise_for_problems(store, checks, "my profiles/lab.yaml")
    # the command that fetches the corrupt file again, with the profile as given (a folder without a manifest
    # names no repo to stage)
    assert found.value.hint == ("stage them again: hpclaunch stage-assets --model org/tiny --profile "
                                "'my profiles/lab.yaml' (only bad files are fetched)")


def test_unpack_refuses_members_that_would_land_outside_the_store(tmp_path: Path) -> None:
    """A hostile archive (`../escape`, an absolute name, a link pointing out) is refused, on every Python: the
    data filter where tarfile has it, the same checks by hand on Debian 12's 3.11.2."""
    import io

    from hpclaunch.assets.pack import unpack

    for name, kind in (("../escape.txt", tarfile.REGTYPE), ("/abs.txt", tarfile.REGTYPE), ("ln", tarfile.SYMTYPE)):
        archive = tmp_path / "bad.tar"
        with tarfile.open(archive, "w") as tar:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = 2
                tar.addfile(info, io.BytesIO(b"hi"))
        with pytest.raises(AssetError, match="cannot read"):
            unpack(archive, tmp_path / "store")
        assert not (tmp_path / "escape.txt").exists()
