"""Hints and options a user pastes: `submit --exclude NODE[,NODE]` (Slurm only, merged with --sbatch exclude=,
a resubmission's nodes and the suspect nodes); hints that repeat the --profile the user typed (a file path stays
a file path); a missing resolved.yaml or script is said before a missing --profile."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _sbatch_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH --exclude")]


def test_exclude_is_written_once_with_every_node_given(hpclaunch):
    r = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--exclude", "node3", "--exclude",
                  "node[1-2,4],node3", "--sbatch", "exclude=node9", "--dry-run")
    assert r.exit_code == 0, r.output
    assert _sbatch_lines(r.stdout) == ["#SBATCH --exclude='node9,node3,node[1-2,4]'"]


def test_a_resubmission_adds_its_excluded_nodes_to_those_before(hpclaunch):
    first = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--exclude", "node3", "--dry-run", "--json")
    resolved = Path(json.loads(first.stdout)["run_dir"]) / "resolved.yaml"
    again = hpclaunch("submit", str(resolved), "--exclude", "node4", "--dry-run")
    assert again.exit_code == 0, again.output
    assert _sbatch_lines(again.stdout) == ["#SBATCH --exclude=node3,node4"]


@pytest.mark.parametrize(("args", "message"), [
    (("--profile", "local", "--exclude", "node3"),
     "--exclude node3: profile 'local' uses the local scheduler, which runs the job on this machine: there are no "
     "nodes to exclude"),
    (("--profile", "dev-slurm", "--exclude", "node 3"), "'node 3' is not a node name or range (node7, node[1-4])"),
])
def test_a_bad_exclude_is_refused_writing_nothing(hpclaunch, hpc_home, args, message):
    r = hpclaunch("submit", "allreduce", *args, "--dry-run")
    assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.output, r.output
    assert not (hpc_home / "runs").exists()


def test_the_submitted_exclude_joins_the_suspect_nodes(hpclaunch, hpc_home):
    from hpclaunch.schedulers.slurm.scheduler import exclude_option
    from hpclaunch.state import suspects

    r = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--exclude", "node[1-2]", "--dry-run", "--json")
    script = Path(json.loads(r.stdout)["run_dir"]) / "job.sbatch"
    assert exclude_option(script) == []  # no suspects: the script's own #SBATCH line does it
    suspects.remember(["node4"], "device error", "12")
    assert exclude_option(script) == ["--exclude=node4,node[1-2]"]
    assert exclude_option(script, ["node3"]) == ["--exclude=node3,node4,node[1-2]"]  # resume --exclude node3


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    """The local profile, copied to a file of another name and given to --profile as a path."""
    path = tmp_path / "my profiles" / "lab.yaml"
    path.parent.mkdir()
    shutil.copy(REPO / "cluster_profiles" / "local.yaml", path)
    return path


def test_hints_repeat_the_profile_file_as_typed(hpclaunch, profile_file):
    typed = str(profile_file)
    r = hpclaunch("submit", "allreduce", "--profile", typed, "--partition", "nope", "--dry-run")
    assert r.exit_code == 2, r.output
    hint = r.stderr.split("`", 2)[1]
    assert hint == f"hpclaunch profiles show {shlex.quote(typed)}"
    shown = hpclaunch(*shlex.split(hint)[1:])  # pasted, it works
    assert shown.exit_code == 0 and "local" in shown.stdout, shown.output

    # a recipe whose hub model is not staged: the stage-assets hint names the file as well
    dry = hpclaunch("submit", "gpt2", "--profile", typed, "--preset", "full", "--layout", "1n1g", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "hpclaunch stage-assets --model gpt2 --dataset " in dry.stderr
    assert f" --profile {shlex.quote(typed)}` (staging needs network" in dry.stderr
    assert "--profile lab" not in dry.stderr
    # the resolved.yaml keeps it, and accepts the same file again
    resolved = Path(json.loads(hpclaunch("submit", "allreduce", "--profile", typed, "--dry-run", "--json").stdout)
                    ["run_dir"]) / "resolved.yaml"
    assert yaml.safe_load(resolved.read_text())["profile_ref"] == typed
    assert hpclaunch("submit", str(resolved), "--profile", typed, "--dry-run").exit_code == 0


@pytest.mark.parametrize(("command", "target", "message"), [
    ("submit", "nope/resolved.yaml", "no such file: nope/resolved.yaml"),
    ("plan", "nope/resolved.yaml", "no such file: nope/resolved.yaml"),
    ("submit", "nope.py", "no such script"),
    ("submit", "nope-recipe", "unknown recipe 'nope-recipe'"),
])
def test_a_missing_file_is_said_before_a_missing_profile(hpclaunch, command, target, message):
    r = hpclaunch(command, target)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "--profile is required" not in r.stderr


def test_without_a_profile_an_existing_recipe_still_asks_for_one(hpclaunch):
    r = hpclaunch("submit", "allreduce", "--dry-run")
    assert r.exit_code == 2 and "--profile is required" in r.stderr
