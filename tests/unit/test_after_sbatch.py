"""submit --sbatch KEY=VALUE and --after JOB[:ok|any|notok] through the real CLI (docs/profiles.md#more-sbatch-options).
What sbatch really does with --after is tests/integration/test_after.py, on the dev cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpclaunch.schedulers.slurm.options import (
    ALTERNATIVES,
    INSTEAD_OF,
    KNOWN,
    OWNED,
    dependency_option,
    over,
    parse_sbatch,
    signal_lead,
)

REPO = Path(__file__).resolve().parents[2]


def _no_run_dirs(hpc_home: Path) -> bool:
    runs = hpc_home / "runs"
    return not runs.exists() or not any(runs.iterdir())


def test_sbatch_options_reach_the_script_over_the_profile_and_are_recorded(hpclaunch, hpc_home, tmp_path):
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["sbatch_extra"] = {"constraint": "a100", "exclusive": None}
    profile = tmp_path / "extra.yaml"
    profile.write_text(yaml.safe_dump(data))
    result = hpclaunch("submit", "allreduce", "--profile", str(profile), "--dry-run", "--sbatch", "constraint=h100",
                       "--sbatch", "--mem=64G", "--sbatch", "mail-user=a b@example.org")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --constraint=h100" in lines and "#SBATCH --exclusive" in lines
    assert "#SBATCH --mem=64G" in lines and "#SBATCH --mail-user='a b@example.org'" in lines
    assert not any("a100" in line for line in lines)
    # recorded in resolved.yaml: resubmitting it keeps them, and a new --sbatch goes over them
    resolved = next((hpc_home / "runs").glob("*/resolved.yaml"))
    assert yaml.safe_load(resolved.read_text())["sbatch"] == {"constraint": "h100", "mem": "64G",
                                                              "mail-user": "a b@example.org"}
    again = hpclaunch("submit", str(resolved), "--dry-run", "--sbatch", "mem=32G")
    assert again.exit_code == 0, again.output
    assert "#SBATCH --mem=32G" in again.stdout and "#SBATCH --constraint=h100" in again.stdout


@pytest.mark.parametrize("flag, words", [
    ("memory=1G", ["'memory' is not an sbatch option", "similar: mem"]),
    ("time=10", ["hpclaunch writes --time itself", "submit --time"]),
    ("dependency=afterok:1", ["--dependency", "submit --after"]),
    ("output=/tmp/x", ["--output", "run directory"]),
    ("mem=1G\n#SBATCH --x", ["line break"]),
    ("=1", ["'' is not an sbatch option"]),
])
def test_a_bad_sbatch_option_exits_2_before_anything_is_written(hpclaunch, hpc_home, flag, words):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--sbatch", flag)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"hpclaunch: error: --sbatch {flag!r}"), result.stderr
    for word in words:
        assert word in result.stderr
    assert _no_run_dirs(hpc_home)


def test_the_local_scheduler_refuses_sbatch_and_after(hpclaunch, hpc_home):
    sbatch = hpclaunch("submit", "allreduce", "--profile", "local", "--sbatch", "mem=1G")
    assert sbatch.exit_code == 2 and "--sbatch: profile 'local' uses the local scheduler" in sbatch.stderr
    after = hpclaunch("submit", "allreduce", "--profile", "local", "--after", "local-3")
    assert after.exit_code == 2, after.output
    assert "--after: the local scheduler starts a job at once and cannot wait" in after.stderr
    sweep = hpclaunch("submit", "allreduce", "--profile", "local", "--sweep", "train.lr=1,2", "--after", "local-3")
    assert sweep.exit_code == 2 and "cannot wait" in sweep.stderr
    assert _no_run_dirs(hpc_home)


def test_after_becomes_one_dependency_and_a_dry_run_says_so(hpclaunch):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--dry-run", "--after", "123",
                       "--after", "456_2:any", "--after", "789:notok")
    assert result.exit_code == 0, result.output
    assert "# would be queued with: --dependency=afterok:123,afterany:456_2,afternotok:789" in result.stderr
    assert "dependency" not in result.stdout  # not in the script: rerun as is, it would wait again
    sweep = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--dry-run", "--sweep", "train.lr=1,2",
                      "--after", "123")
    assert sweep.exit_code == 0 and "--dependency=afterok:123" in sweep.stderr


@pytest.mark.parametrize("value", ["abc", "12:maybe", "local-3", "12,13", "", "12:ok:any"])
def test_a_bad_after_exits_2(hpclaunch, hpc_home, value):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--after", value)
    assert result.exit_code == 2, result.output
    assert f"--after {value!r}: expected JOB[:ok|any|notok]" in result.stderr
    assert _no_run_dirs(hpc_home)


def test_the_tables():
    assert set(OWNED) <= KNOWN and set(INSTEAD_OF) <= KNOWN and set(INSTEAD_OF.values()) <= set(OWNED)
    assert all(group <= KNOWN and not group & set(OWNED) for group in ALTERNATIVES)
    assert over({"requeue": None, "mem": "1G", "time": "1"}, {"no-requeue": None, "mem-per-cpu": "2G"}) == {
        "time": "1", "no-requeue": None, "mem-per-cpu": "2G"}
    assert [signal_lead(v) for v in ("B:USR1@600", "b:sigusr1@5", "B:USR1")] == [600, 5, 60]
    assert parse_sbatch(["exclusive", "mem=", "--gpus-per-task=1"]) == {"exclusive": None, "mem": "",
                                                                        "gpus-per-task": "1"}
    assert dependency_option([]) == []
    assert dependency_option(["1", "2:ok"]) == ["--dependency=afterok:1,afterok:2"]
