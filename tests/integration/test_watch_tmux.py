"""`hpclaunch watch` and `hpclaunch logs -f` as a person sees them: in a tmux pane 80 columns wide, against a
running GPT-2 tiny job on the local scheduler (2 CPU ranks). Two captures of the pane a few refreshes apart
show the job's step advancing (watch's table; the progress line under the followed log lines); Ctrl-C ends
watch with exit status 0, the follow with 130 and how to re-attach, no traceback, the job still running."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from hpclaunch.cli.main import cli; cli()"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def _wait(what: str, check, timeout: float = 120.0):  # noqa: ANN001, ANN202
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def _step(pane: str, job: str) -> int | None:
    """The step shown in the job's row of the table (`step/max`)."""
    for line in pane.splitlines():
        if line.startswith(job + " "):
            found = re.search(r"\s(\d+)/\d+k\s", line)  # step/max (100000 reads 100k)
            return int(found.group(1)) if found else None
    return None


def _long_job(hpc_home: Path) -> tuple[str, Path]:
    sub = _cli("submit", str(REPO / "recipes" / "gpt2"), "--preset", "tiny", "--profile", "local",
               "--set", "train.max_steps=100000", "--set", "train.log_every=1", "--set", "train.save_every=0",
               "--set", "train.eval_every=0", "--json")
    assert sub.returncode == 0, sub.stderr
    job, run_dir = json.loads(sub.stdout)["job_id"], Path(json.loads(sub.stdout)["run_dir"])
    _wait("the job's first metrics", lambda: RunFiles(run_dir).metrics_file(0).is_file())
    return job, run_dir


def _in_tmux(tmux: list[str], hpc_home: Path, command: str) -> Callable[[], str]:
    """Type `command` (hpclaunch's arguments) into a fresh 80 x 20 pane; a function that captures the pane."""
    env = f"env PYTHONPATH={shlex.quote(str(REPO))} HPCLAUNCH_HOME={shlex.quote(str(hpc_home))} TERM=xterm"
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "20", "-s", "w", "bash --norc"],
                   check=True, cwd=REPO)
    subprocess.run([*tmux, "send-keys", "-t", "w", f"{env} {shlex.join(CLI)} {command}", "Enter"], check=True)

    def capture() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "w"], capture_output=True, text=True,
                              check=True).stdout
    return capture


def test_watch_in_tmux_shows_the_running_jobs_step_advancing(hpc_home, tmp_path):
    job, _ = _long_job(hpc_home)
    tmux = ["tmux", "-L", f"hpclaunch-watch-{os.getpid()}"]
    try:
        capture = _in_tmux(tmux, hpc_home, f"watch {job} --interval 1; echo watch-exit=$?")

        first = _wait("the job's row with a step", lambda: _step(capture(), job) is not None and capture())
        assert "RUNNING" in first and "hpclaunch watch" in first, first
        assert max(len(line) for line in first.splitlines()) <= 80, first
        # the step advances on the screen (however long a step takes on the busy machine)
        second = _wait("the step to advance", lambda: (pane := capture()) and (_step(pane, job) or 0) >
                       _step(first, job) and pane)  # type: ignore[operator]
        assert _step(second, job) > _step(first, job), f"{first}\n---\n{second}"  # type: ignore[operator]

        subprocess.run([*tmux, "send-keys", "-t", "w", "C-c"], check=True)
        exited = re.compile(r"^watch-exit=(\d+)$", re.M)  # the echo's output, not the typed command line
        after = _wait("watch to exit", lambda: (pane := capture()) and exited.search(pane) and pane)
        code = exited.search(after)
        assert code and code.group(1) == "0", after
        assert "Traceback" not in after and "KeyboardInterrupt" not in after, after
        status = json.loads(_cli("status", job, "--json").stdout)
        assert status["state"] == "RUNNING"  # the view quits, the job goes on
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        _cli("cancel", job)


_PROGRESS = re.compile(r"^step (\d+)/100k  loss [\d.]+  [\d.]+k? tok/s  ETA \S+\s*$", re.M)


def test_logs_follow_in_tmux_keeps_the_progress_line_under_the_log_lines(hpc_home, tmp_path):
    job, _ = _long_job(hpc_home)
    tmux = ["tmux", "-L", f"hpclaunch-follow-{os.getpid()}"]
    try:
        capture = _in_tmux(tmux, hpc_home, f"logs {job} -f; echo follow-exit=$?")
        first = _wait("the progress line", lambda: (pane := capture()) and _PROGRESS.search(pane) and pane)
        lines = [line for line in first.splitlines() if line.strip()]
        assert _PROGRESS.match(lines[-1]), first  # the last line on the screen, under the streamed log lines
        assert any(line.startswith("[rank0] ") for line in lines[:-1]), first
        assert len(_PROGRESS.findall(first)) == 1, first  # redrawn in place, not repeated
        first_step = int(_PROGRESS.search(first).group(1))  # type: ignore[union-attr]
        second = _wait("the progress line's step to advance", lambda: (pane := capture()) and (
            m := _PROGRESS.search(pane)) and int(m.group(1)) > first_step and pane)
        steps = [int(m.group(1)) for m in (_PROGRESS.search(first), _PROGRESS.search(second)) if m]
        assert len(steps) == 2 and steps[1] > steps[0], f"{first}\n---\n{second}"

        subprocess.run([*tmux, "send-keys", "-t", "w", "C-c"], check=True)
        exited = re.compile(r"^follow-exit=(\d+)$", re.M)
        after = _wait("the follow to stop", lambda: (pane := capture()) and exited.search(pane) and pane)
        assert exited.search(after).group(1) == "130", after  # type: ignore[union-attr]
        assert f"stopped following job {job}; the job still runs" in after and f"hpclaunch logs {job} -f" in after
        assert "Traceback" not in after, after
        assert json.loads(_cli("status", job, "--json").stdout)["state"] == "RUNNING"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        _cli("cancel", job)
