"""The listing tables as a person sees them: `recipes list`, `profiles list` (a broken user profile among them)
and `jobs` (long job names) typed into a tmux pane 80 and 60 columns wide. Every recipe name, profile name, job
id and job name is on the screen whole, and no line is wider than the pane (tmux would wrap it)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.config.loader import profile_files, recipe_dirs
from tests.fixtures.jobrecords import add_local_record

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from hpclaunch.cli.main import cli; cli()"]
JOBS = {"local-1000": "bert-large-wikitext-zero3-lr3e-4-seq512", "local-1001": "gpt2-tiny-smoke",
        "local-1002": "mixtral-8x7b-moe-pretrain-07"}

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


def _screen(command: str, width: int) -> str:
    """What `hpclaunch COMMAND` leaves in a fresh tmux pane `width` columns wide, wrapped lines joined."""
    names = ("HPCLAUNCH_HOME", "HPCLAUNCH_PATH", "XDG_CONFIG_HOME")
    env = " ".join(f"{n}={shlex.quote(os.environ[n])}" for n in names)
    tmux = ["tmux", "-L", f"hpclaunch-tables-{os.getpid()}-{time.monotonic_ns()}"]  # a server of its own
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", "50", "-s", "t", "bash --norc"],
                   check=True, cwd=REPO)
    try:
        subprocess.run([*tmux, "send-keys", "-t", "t", f"clear; env PYTHONPATH={shlex.quote(str(REPO))} {env} "
                        f"TERM=xterm {shlex.join(CLI)} {command}; echo table-done", "Enter"], check=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            pane = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-t", "t"], capture_output=True, text=True,
                                  check=True).stdout
            if re.search(r"^table-done$", pane, re.M):
                return pane[:re.search(r"^table-done$", pane, re.M).start()]  # type: ignore[union-attr]
            time.sleep(0.2)
        pytest.fail(f"`hpclaunch {command}` did not finish in a minute:\n{pane}")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _assert_whole(screen: str, words: list[str], width: int) -> None:
    assert max(len(line.rstrip()) for line in screen.splitlines()) <= width, screen
    for word in words:
        assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", screen, re.M), f"{word!r} not whole:\n{screen}"


@pytest.mark.parametrize("width", [80, 60])
def test_recipe_names_are_whole(hpc_home, width):
    _assert_whole(_screen("recipes list", width), sorted(recipe_dirs()), width)


@pytest.mark.parametrize("width", [80, 60])
def test_profile_names_are_whole_with_a_broken_profile_among_them(hpc_home, tmp_path, width):
    user = tmp_path / "xdg-config" / "hpclaunch" / "cluster_profiles"
    user.mkdir(parents=True)
    (user / "my-institute-gpu-cluster.yaml").write_text("name: my-institute-gpu-cluster\nscheduler: [slurm\n")
    screen = _screen("profiles list", width)
    assert re.search(r"^\S*\s*my-institute-gpu-cluster\s.*INVALID", screen, re.M), screen
    _assert_whole(screen, sorted(profile_files()), width)


@pytest.mark.parametrize("width", [80, 60])
def test_job_ids_and_names_are_whole(hpc_home, width):
    for n, (job, name) in enumerate(JOBS.items()):
        add_local_record(job, hpc_home / "gone", recipe="allreduce", name=name,
                         submitted_at=f"2026-11-22T07:0{n}:00+0000")
    screen = _screen("jobs", width)
    _assert_whole(screen, [*JOBS, *JOBS.values()], width)
    assert all(re.search(rf"^{job}\s+{name}\s+UNKNOWN\s", screen, re.M) for job, name in JOBS.items()), screen
