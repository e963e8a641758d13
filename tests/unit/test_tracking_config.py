"""`tracking.wandb`: how the recipe's keys, the profile's and --set make the job's W&B settings; bad values refused
before anything is written; the W&B run id of a run directory; what `hpclaunch sync` picks to upload."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.config.base import dump
from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.jobs.sync import JobRuns, Segment, check_found
from hpclaunch.runtime.train.tracking import wandb_run_id
from hpclaunch.submission.resolve import CliOverrides, resolve
from tests.unit.test_cli_errors import _assert_clean_failure, _recipe_dir, no_sbatch_path  # noqa: F401


def _wandb(write_profile, write_recipe, profile_tracking=None, recipe_tracking=None, sets=()):
    over = {"tracking": profile_tracking} if profile_tracking is not None else {}
    prof = write_profile(**over)
    rec = {"tracking": recipe_tracking} if recipe_tracking is not None else {}
    folder = write_recipe(**rec)
    spec = resolve(str(folder), str(prof), CliOverrides(sets=tuple(sets)))
    w = spec.tracking.wandb
    return None if w is None else dump(w)


@pytest.mark.parametrize("profile, recipe, sets, expected", [
    pytest.param(None, None, (), None, id="off-by-default"),
    pytest.param({"wandb": {"entity": "team"}}, None, (), None, id="profile-entity-alone-is-off"),
    pytest.param({"wandb": {"entity": "team"}}, {"wandb": {"project": "gpt"}}, (),
                 {"project": "gpt", "entity": "team", "group": None, "tags": [], "mode": "offline"},
                 id="recipe-project-over-profile-entity"),
    pytest.param({"wandb": {"entity": "team", "project": "site"}}, {"wandb": {"project": "gpt", "tags": ["a"]}},
                 ("tracking.wandb.mode=online",),
                 {"project": "gpt", "entity": "team", "group": None, "tags": ["a"], "mode": "online"},
                 id="set-mode-recipe-project"),
    pytest.param(None, None, ("tracking.wandb.project=quick", "tracking.wandb.group=g1"),
                 {"project": "quick", "entity": None, "group": "g1", "tags": [], "mode": "offline"},
                 id="set-turns-on"),
    pytest.param({"wandb": {"project": "site"}}, None, ("tracking.wandb.mode=disabled",), None,
                 id="set-disables-the-profile's"),
])
def test_recipe_keys_over_the_profile(write_profile, write_recipe, profile, recipe, sets, expected):
    assert _wandb(write_profile, write_recipe, profile, recipe, sets) == expected


def test_a_mode_without_a_project_is_refused(write_profile, write_recipe):
    with pytest.raises(ConfigError, match=r"tracking.wandb: tracking.wandb.mode is online but no project"):
        _wandb(write_profile, write_recipe, sets=("tracking.wandb.mode=online",))


@pytest.mark.parametrize("key, value, expected", [
    ("tracking.wandb.project", "a/b", "'a/b' is not a W&B name"),
    ("tracking.wandb.entity", "team:x", "'team:x' is not a W&B name"),
    ("tracking.wandb.mode", "cloud", "tracking.wandb.mode: Input should be 'offline', 'online' or 'disabled'"),
])
def test_bad_values_exit_2_before_anything_is_written(hpclaunch, hpc_home, no_sbatch_path, tmp_path,  # noqa: F811
                                                      key, value, expected):
    folder = _recipe_dir(tmp_path)
    result = hpclaunch("submit", str(folder), "--profile", "dev-slurm", "--set", f"{key}={value}")
    _assert_clean_failure(result, hpc_home, expected)


def test_wandb_run_id_is_the_run_folder_and_a_sweep_element_names_its_sweep(tmp_path):
    run = tmp_path / "20261123-120518-gpt2-6e66e8"
    assert wandb_run_id(run) == "20261123-120518-gpt2-6e66e8"
    element = tmp_path / "20261123-120518-gpt2-sweep-a1b2c3" / "element-3"
    assert wandb_run_id(element) == "20261123-120518-gpt2-sweep-a1b2c3-element-3"
    long = tmp_path / ("x" * 100 + ".v2")
    assert len(wandb_run_id(long)) == 64 and set(wandb_run_id(long)) <= set("x-v2")


def _segment(run_dir: Path, stamp: str, run_id: str, synced: bool) -> Segment:
    folder = run_dir / "wandb" / f"offline-run-{stamp}-{run_id}"
    folder.mkdir(parents=True)
    (folder / f"run-{run_id}.wandb").write_bytes(b"")
    if synced:
        (folder / f"run-{run_id}.wandb.synced").write_bytes(b"")
    return Segment(folder)


def test_sync_leaves_out_what_was_uploaded_and_a_running_jobs_newest_run(tmp_path):
    old = _segment(tmp_path, "20261123_100000", "job-1", synced=True)
    mid = _segment(tmp_path, "20261123_110000", "job-1", synced=False)
    new = _segment(tmp_path, "20261123_120000", "job-1", synced=False)
    from hpclaunch.state.runfiles import RunFiles

    assert [p.name for p in RunFiles(tmp_path).wandb_offline_runs()] == [s.path.name for s in (old, mid, new)]
    ended = JobRuns("1", tmp_path, running=False, segments=[old, mid, new])
    assert ended.to_upload(include_synced=False) == [mid, new]
    assert ended.to_upload(include_synced=True) == [old, mid, new]
    running = JobRuns("1", tmp_path, running=True, segments=[old, mid, new])
    assert running.to_upload(include_synced=False) == [mid]
    assert old.run_id == "job-1" and old.synced and not new.synced


def test_sync_of_jobs_without_wandb_says_how_to_turn_it_on(tmp_path):
    with pytest.raises(HpclaunchError) as err:
        check_found([JobRuns("42", tmp_path)])
    assert err.value.exit_code == 2
    assert "no offline W&B runs in 42" in str(err.value) and "--set tracking.wandb.project=NAME" in str(err.value)
