"""Run directories are complete or absent; resolved.yaml resubmits to the same script; the registry
stays correct under concurrent writers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hpclaunch.state import registry
from hpclaunch.submission.rundir import write_run_dir

REPO = Path(__file__).resolve().parents[2]


def test_dry_run_writes_a_complete_run_directory(hpclaunch, hpc_home):
    result = hpclaunch(
        "submit", "allreduce_ds", "--profile", "dev-slurm", "--layout", "2n2g", "--dry-run", "--json"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    run = Path(out["run_dir"])
    assert run.parent == hpc_home / "runs" and out["job_id"] is None
    assert sorted(p.name for p in run.iterdir()) == [
        "ds_config.json",
        "job.sbatch",
        "logs",
        "metrics",
        "recipe",
        "requires.json",  # what the job's environment must hold (none: a task-test recipe)
        "resolved.yaml",
    ]
    assert json.loads((run / "requires.json").read_text()) == {}
    assert (run / "job.sbatch").stat().st_mode & stat.S_IXUSR
    assert (run / "recipe" / "allreduce.py").is_file() and (run / "recipe" / "recipe.yaml").is_file()
    assert f"{run}/recipe/allreduce.py --config {run}/resolved.yaml" in (run / "job.sbatch").read_text()
    assert json.loads((run / "ds_config.json").read_text())["train_batch_size"] == 4
    assert not (hpc_home / "registry").exists(), "a dry run records no job"


def test_resolved_yaml_resubmits_to_the_same_script(hpclaunch, hpc_home):
    first = json.loads(
        hpclaunch(
            "submit",
            "allreduce",
            "--profile",
            "dev-slurm",
            "-N",
            "2",
            "-G",
            "2",
            "--set",
            "train.lr=0.5",
            "--dry-run",
            "--json",
        ).stdout
    )
    again = hpclaunch("submit", f"{first['run_dir']}/resolved.yaml", "--dry-run", "--json")
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    a, b = Path(first["run_dir"]), Path(second["run_dir"])
    assert a != b
    for name in ("job.sbatch", "resolved.yaml"):
        assert (a / name).read_text().replace(str(a), "RUN") == (b / name).read_text().replace(str(b), "RUN")


def test_resubmitting_under_another_profile_is_refused(hpclaunch, hpc_home):
    first = json.loads(
        hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--dry-run", "--json").stdout
    )
    result = hpclaunch("submit", f"{first['run_dir']}/resolved.yaml", "--profile", "local", "--dry-run")
    assert result.exit_code == 2
    assert "was resolved for profile 'dev-slurm'" in result.stderr


def test_a_failed_write_leaves_no_run_directory(tmp_path):
    recipe = REPO / "tests" / "fixtures" / "recipes" / "allreduce"
    run = tmp_path / "runs" / "r1"
    with pytest.raises(FileNotFoundError):
        write_run_dir(run, {"job.sbatch": "#!/bin/bash\n", "no/such/dir.txt": "x"}, (recipe, None))
    assert list((tmp_path / "runs").iterdir()) == []


def _record(i: int) -> registry.JobRecord:
    return registry.JobRecord(
        job_id=str(1000 + i),
        scheduler="slurm",
        profile="dev-slurm",
        recipe="allreduce",
        preset=None,
        launcher="torchrun",
        layout="1n2g",
        name="allreduce",
        run_dir=f"/runs/{i}",
        submitted_at=f"2026-01-01T00:00:{i:02d}+0000",
    )


def test_concurrent_records_are_all_kept(hpc_home):
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: registry.add(_record(i)), range(40)))
    records = registry.all_records()
    assert [r.job_id for r in records] == [str(1000 + i) for i in range(40)]
    assert registry.get("1007").run_dir == "/runs/7"


def test_local_ids_are_unique_across_processes(hpc_home):
    code = "from hpclaunch.state import registry\nprint(' '.join(registry.next_local_id() for _ in range(10)))"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        for _ in range(4)
    ]
    ids = [i for p in procs for i in p.communicate(timeout=120)[0].split()]
    assert len(ids) == 40 and len(set(ids)) == 40
    assert set(ids) == {f"local-{n}" for n in range(1, 41)}


def test_unknown_job(hpclaunch, hpc_home):
    result = hpclaunch("status", "424242")
    assert result.exit_code == 2
    assert result.stderr.startswith("hpclaunch: error: unknown job '424242'")


def test_run_root_with_a_fallback_and_an_unset_variable(write_profile, write_recipe, monkeypatch, tmp_path):
    from hpclaunch.errors import ConfigError
    from hpclaunch.submission.resolve import resolve
    from hpclaunch.submission.rundir import run_root

    monkeypatch.delenv("HL_TEST_SCRATCH", raising=False)
    folder = write_recipe()

    def root(text: str):
        return run_root(resolve(str(folder), str(write_profile(run_root=text))))

    assert root("${HL_TEST_SCRATCH:-" + str(tmp_path / "home") + "}/runs") == tmp_path / "home" / "runs"
    monkeypatch.setenv("HL_TEST_SCRATCH", str(tmp_path / "scratch"))
    assert root("${HL_TEST_SCRATCH:-/elsewhere}/runs") == tmp_path / "scratch" / "runs"
    monkeypatch.delenv("HL_TEST_SCRATCH")
    with pytest.raises(ConfigError) as err:
        root("$HL_TEST_SCRATCH/runs")  # not a folder literally named "$HL_TEST_SCRATCH" under the current one
    assert "profile testprof run_root: '$HL_TEST_SCRATCH/runs': $HL_TEST_SCRATCH is not set here" in str(err.value)
    assert "${HL_TEST_SCRATCH:-/other/path}" in str(err.value)
