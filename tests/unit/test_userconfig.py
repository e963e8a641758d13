"""The user config ($XDG_CONFIG_HOME/hpclaunch/config.yaml): default_profile for submit/plan, its errors, and
`hpclaunch logs` without a job (the newest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles


@pytest.fixture
def config(tmp_path: Path, hpc_home: Path):
    """Writes the config file where hpclaunch looks for it ($XDG_CONFIG_HOME from hpc_home)."""
    path = tmp_path / "xdg-config" / "hpclaunch" / "config.yaml"

    def write(text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


def runs(hpc_home: Path) -> list[Path]:
    folder = hpc_home / "runs"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_default_profile_makes_profile_optional(hpclaunch, config):
    config("default_profile: guangzhou-a800\n")
    result = hpclaunch("submit", "bert_large", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["profile"] == "guangzhou-a800"


def test_profile_flag_beats_the_default(hpclaunch, config):
    config("default_profile: guangzhou-a800\n")
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["profile"] == "local"


def test_plan_uses_the_default_too(hpclaunch, config):
    config("default_profile: guangzhou-a800\n")
    result = hpclaunch("plan", "gpt2", "--preset", "tiny", "--json")
    assert result.exit_code == 0, result.output


def test_without_profile_or_config_the_error_names_the_config_file(hpclaunch, hpc_home, tmp_path):
    result = hpclaunch("submit", "bert_large", "--dry-run")
    assert result.exit_code == 2
    assert "--profile is required" in result.stderr
    assert str(tmp_path / "xdg-config" / "hpclaunch" / "config.yaml") in result.stderr
    assert runs(hpc_home) == []


@pytest.mark.parametrize("text, key, words", [
    ("default_profil: local\n", "default_profil", "unknown setting"),
    ("default_profile: [local]\n", "default_profile", "expected a profile name"),
    ("default_profile: no-such-cluster\n", "default_profile", "no such profile: 'no-such-cluster'"),
    ("default_profile: local\n  bad: [\n", None, "invalid YAML"),
    ("- local\n", None, "expected a mapping"),
])
def test_bad_config_is_a_clear_error(hpclaunch, hpc_home, config, text, key, words):
    path = config(text)
    result = hpclaunch("submit", "bert_large", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert str(path) in result.stderr and words in result.stderr, result.stderr
    if key:
        assert f"{path}: {key}:" in result.stderr
    assert runs(hpc_home) == []


def _job(hpc_home: Path, job_id: str, when: str, line: str) -> None:
    run_dir = hpc_home / "runs" / job_id
    files = RunFiles(run_dir)
    files.rank_log(0, 0).parent.mkdir(parents=True)
    files.rank_log(0, 0).write_text(line + "\n")
    registry.add(registry.JobRecord(job_id=job_id, scheduler="local", profile="local", recipe="gpt2", preset="tiny",
                                    launcher="torchrun", layout="1n1g", name="gpt2", run_dir=str(run_dir),
                                    submitted_at=when))


def test_logs_without_a_job_shows_the_newest(hpclaunch, hpc_home):
    _job(hpc_home, "local-1", "2026-01-01T00:00:00+0000", "older job's line")
    _job(hpc_home, "local-2", "2026-01-02T00:00:00+0000", "newest job's line")
    result = hpclaunch("logs")
    assert result.exit_code == 0, result.output
    assert "newest job's line" in result.stdout and "older" not in result.stdout
    assert "local-2" in result.stderr


def test_logs_without_any_job_says_so(hpclaunch):
    result = hpclaunch("logs")
    assert result.exit_code == 2
    assert "no job is recorded yet" in result.stderr
