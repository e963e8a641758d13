"""`hpclaunch clean`: real run directories from dry runs and a real local job still running."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hpclaunch.errors import NotFoundError
from hpclaunch.schedulers.local import LocalScheduler
from hpclaunch.state import registry

DAY = 86400


def dry_run(hpclaunch) -> Path:
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    return Path(json.loads(result.stdout.splitlines()[-1])["run_dir"])


def age(path: Path, days: float) -> None:
    """Make `path` and everything in it look unchanged for `days`."""
    when = time.time() - days * DAY
    for p in [path, *path.rglob("*")]:
        os.utime(p, (when, when), follow_symlinks=False)


def local_job(run_dir: Path, command: str) -> str:
    """A real local job (LocalScheduler, its own process group) running `command` in `run_dir`, recorded."""
    script = run_dir / "job.sbatch"
    script.write_text(f"#!/bin/bash\n{command}\n")
    job_id = LocalScheduler().submit(script, run_dir)
    registry.add(registry.JobRecord(job_id=job_id, scheduler="local", profile="local", recipe="allreduce",
                                    preset=None, launcher="torchrun", layout="1n2g", name="allreduce",
                                    run_dir=str(run_dir), submitted_at=time.strftime("%Y-%m-%dT%H:%M:%S+0000")))
    return job_id


def test_dry_runs_are_removed_fresh_and_foreign_folders_stay(hpclaunch, hpc_home):
    old_a, old_b, fresh = dry_run(hpclaunch), dry_run(hpclaunch), dry_run(hpclaunch)
    age(old_a, 2)
    age(old_b, 2)
    foreign = hpc_home / "runs" / "my-notes"
    foreign.mkdir()
    age(foreign, 100)
    result = hpclaunch("clean", "--dry-runs", "--yes")
    assert result.exit_code == 0, result.output
    assert not old_a.exists() and not old_b.exists()
    assert fresh.exists()  # may be a submission still writing its record
    assert foreign.exists()  # not a run directory
    assert f"remove: {old_a}" in result.stdout


def test_older_than_picks_by_age(hpclaunch):
    old, newer = dry_run(hpclaunch), dry_run(hpclaunch)
    age(old, 40)
    age(newer, 2)
    result = hpclaunch("clean", "--dry-runs", "--older-than", "30d", "--yes")
    assert result.exit_code == 0, result.output
    assert not old.exists() and newer.exists()


def test_dry_run_flag_and_the_prompt_remove_nothing(hpclaunch):
    run = dry_run(hpclaunch)
    age(run, 2)
    listed = hpclaunch("clean", "--dry-runs", "--dry-run")
    assert listed.exit_code == 0 and f"would remove: {run}" in listed.stdout
    refused = hpclaunch("clean", "--dry-runs", input="y\n")  # stdin is no terminal: nobody to ask
    assert refused.exit_code == 2 and "no terminal to confirm it: add --yes" in refused.stderr
    assert "Aborted" not in refused.output and run.exists()


def test_a_running_job_is_kept_and_an_ended_one_goes_with_its_record(hpclaunch):
    running_dir, ended_dir, dry = dry_run(hpclaunch), dry_run(hpclaunch), dry_run(hpclaunch)
    running = local_job(running_dir, "sleep 60")
    ended = local_job(ended_dir, "true")
    try:
        deadline = time.time() + 30
        while not LocalScheduler().status([ended])[ended].finished:
            assert time.time() < deadline, "the local job did not end"
            time.sleep(0.1)
        for run in (running_dir, ended_dir, dry):
            age(run, 40)
        result = hpclaunch("clean", "--older-than", "30d", "--yes", "--json")
        assert result.exit_code == 0, result.output
        rows = {row["run_dir"]: row for row in json.loads(result.stdout)}
        assert rows[str(running_dir)]["kept"] == f"job {running} is RUNNING"
        assert running_dir.is_dir() and registry.get(running).run_dir == str(running_dir)
        assert rows[str(ended_dir)]["removed"] and not ended_dir.exists()
        with pytest.raises(NotFoundError):
            registry.get(ended)
        assert rows[str(dry)]["dry_run"] and not dry.exists()
        # --dry-runs never touches a recorded job's folder, whatever its state
        assert str(running_dir) not in hpclaunch("clean", "--dry-runs", "--dry-run").stdout
    finally:
        LocalScheduler().cancel(running)


@pytest.mark.parametrize("args, words", [
    ((), "--dry-runs, --older-than AGE, or both"),
    (("--older-than", "a month"), "--older-than: 'a month' is not an age"),
    (("--dry-runs", "--json"), "add --yes"),
])
def test_bad_use_is_exit_2(hpclaunch, args, words):
    if "--json" in args:
        age(dry_run(hpclaunch), 2)
    result = hpclaunch("clean", *args)
    assert result.exit_code == 2, result.output
    assert words in result.stderr


def test_an_unrecorded_folder_that_ran_is_kept(hpclaunch):
    """A run directory with logs but no record here (e.g. recorded under another HPCLAUNCH_HOME) ran a job: kept."""
    run = dry_run(hpclaunch)
    (run / "logs").mkdir(exist_ok=True)
    (run / "logs" / "rank-0.restart-0.log").write_text("step 1\n")
    age(run, 2)
    result = hpclaunch("clean", "--dry-runs", "--yes")
    assert result.exit_code == 0, result.output
    assert run.exists() and "keep (no job record names it, but a job ran in it)" in result.stdout


def test_a_profile_run_root_is_cleaned_too(hpclaunch, tmp_path):
    root = tmp_path / "scratch-runs"
    profiles = tmp_path / "xdg-config" / "hpclaunch" / "cluster_profiles"
    profiles.mkdir(parents=True)
    (profiles / "scratchy.yaml").write_text((Path(__file__).resolve().parents[2] / "cluster_profiles" / "local.yaml")
                                            .read_text() + f"run_root: {root}\n")
    result = hpclaunch("submit", "allreduce", "--profile", "scratchy", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    run = Path(json.loads(result.stdout.splitlines()[-1])["run_dir"])
    assert run.parent == root
    age(run, 2)
    assert hpclaunch("clean", "--dry-runs", "--yes").exit_code == 0
    assert not run.exists()


def test_a_submit_killed_while_writing_its_run_directory_leaves_an_orphan_that_clean_names(hpclaunch, hpc_home):
    """write_run_dir writes `.NAME.partial` and renames it when complete: a submit killed before the rename leaves
    that folder, with whatever it had written (here: a real run directory's files without logs/ and metrics/, and
    one killed right after its mkdir); one killed after the rename but before it recorded its job leaves a
    complete folder that no record names. `clean --dry-runs` names and removes all three."""
    written = dry_run(hpclaunch)
    partial = written.with_name(f".{written.name}.partial")
    written.rename(partial)
    (partial / "logs").rmdir()
    (partial / "metrics").rmdir()
    empty = hpc_home / "runs" / ".20261125-040000-allreduce-abcdef.partial"
    empty.mkdir()
    unrecorded = dry_run(hpclaunch)
    for folder in (partial, empty, unrecorded):
        age(folder, 1)
    listed = hpclaunch("clean", "--dry-runs", "--dry-run")
    assert listed.exit_code == 0, listed.output
    orphan = "orphan: a submit stopped while writing it, no job record"
    assert f"would remove: {partial} ({orphan}, 1d old)" in listed.stdout
    assert f"would remove: {empty} ({orphan}, 1d old)" in listed.stdout
    assert f"would remove: {unrecorded} (dry run, or a submit stopped before it recorded a job, 1d old)" in (
        listed.stdout)
    as_json = json.loads(hpclaunch("clean", "--dry-runs", "--dry-run", "--json").stdout)
    assert sorted(d["run_dir"] for d in as_json if d["orphan"]) == sorted([str(partial), str(empty)])
    fresh = hpc_home / "runs" / ".20261125-050000-allreduce-123456.partial"
    fresh.mkdir()  # may be a submit writing it right now
    removed = hpclaunch("clean", "--dry-runs", "--yes")
    assert removed.exit_code == 0, removed.output
    assert not partial.exists() and not empty.exists() and not unrecorded.exists() and fresh.exists()
