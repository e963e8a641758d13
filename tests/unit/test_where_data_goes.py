"""Where a cluster job's run directory and asset store go when the profile names neither (run_root, assets.store):
the site's scratch ($SCRATCH, $PSCRATCH, $SCRATCHDIR, $WORK) where the login node sets one, and never silently
under $HOME."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user of a login node: a home of their own, no HPCLAUNCH_HOME, no scratch variable yet."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("HPCLAUNCH_HOME", "SCRATCH", "PSCRATCH", "SCRATCHDIR", "WORK"):
        monkeypatch.delenv(var, raising=False)
    return home


def _run_dir(result) -> Path:
    return Path(re.search(r"run directory (\S+)", result.stderr).group(1))


def test_a_cluster_job_goes_to_scratch(hpclaunch, user: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    res = hpclaunch("submit", "gpt2", "--profile", "guangzhou-a800", "--dry-run")
    assert res.exit_code == 0, res.output
    assert _run_dir(res).parent == tmp_path / "scratch" / "hpclaunch" / "runs"
    assert "under $HOME" not in res.stderr
    assert not (user / ".hpclaunch" / "runs").exists()  # nothing under $HOME


def test_under_home_is_said_with_the_key_to_set(hpclaunch, user: Path) -> None:
    res = hpclaunch("submit", "gpt2", "--profile", "guangzhou-a800", "--dry-run")
    assert res.exit_code == 0, res.output
    assert _run_dir(res).parent == user / ".hpclaunch" / "runs"
    assert "run directories and checkpoints go to" in res.stderr and "under $HOME" in res.stderr
    assert "set run_root in profile guangzhou-a800" in res.stderr


def test_the_local_profile_stays_where_it_was(hpclaunch, user: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    res = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run")
    assert res.exit_code == 0, res.output
    assert _run_dir(res).parent == user / ".hpclaunch" / "runs" and "under $HOME" not in res.stderr


def test_the_asset_store_goes_to_scratch_too(hpclaunch, user: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    res = hpclaunch("submit", "gpt2", "--profile", "guangzhou-a800", "--dry-run")
    assert res.exit_code == 0, res.output
    store = tmp_path / "scratch" / "hpclaunch" / "assets"
    assert f"export HPCLAUNCH_ASSET_STORE={store}" in res.stdout, res.stdout
    assert "asset store" not in res.stderr


def test_an_asset_store_under_home_by_default_is_said_with_the_key_to_set(hpclaunch, user: Path) -> None:
    res = hpclaunch("submit", "gpt2", "--profile", "guangzhou-a800", "--dry-run")
    assert res.exit_code == 0, res.output
    assert 'export HPCLAUNCH_ASSET_STORE="${HOME}/.hpclaunch/assets"' in res.stdout
    said = " ".join(res.stderr.split())
    assert f"the asset store (models, datasets) is {user / '.hpclaunch' / 'assets'}, under $HOME" in said, said
    assert "set assets.store in profile guangzhou-a800" in said


def test_a_store_the_profile_names_is_used_as_given(hpclaunch, user: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    res = hpclaunch("submit", "allreduce", "--profile", "musa-s4000", "--dry-run")  # store: /data/hpclaunch-assets
    assert res.exit_code == 0, res.output
    assert "export HPCLAUNCH_ASSET_STORE=/data/hpclaunch-assets" in res.stdout
