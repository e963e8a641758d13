"""`hpclaunch watch`: the frame of a real GPT-2 tiny run (2 CPU ranks, local scheduler), piped and on an
80-column terminal; the sparkline and durations it draws. The live refresh under tmux is in
tests/integration/test_watch_tmux.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hpclaunch.cli import live
from hpclaunch.jobs import watch
from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]
STEPS = 12


def test_sparkline_follows_the_values_and_fits_its_width():
    assert watch.sparkline([7, 1, 0]) == "█▂▁"
    assert watch.sparkline([5.0] * 4) == "▄▄▄▄"
    assert watch.sparkline([]) == ""
    falling = watch.sparkline([float(100 - i) for i in range(100)])
    assert len(falling) == watch.SPARK_WIDTH and falling[0] == "█" and falling[-1] == "▁"


def test_long_slurm_values_fit_80_and_60_columns_and_no_number_is_cut():
    from rich.console import Console

    rows = [watch.Row("12345678_12", "PENDING (ReqNodeNotAvail)", "1-01:02:03", "2-00:00:00", 123456, 1000000,
                      12.3456, 1.23e6, 400000, tuple(range(50, 0, -1))),
            watch.Row("4242", "RUNNING", "23:02:03", "1-00:00:00", 1200, 5000, 2.5, 40000, 3600, (3, 2, 1))]
    console = Console(width=80, force_terminal=True, no_color=True, record=True)
    console.print(live.table(rows, "hpclaunch watch", 80))
    lines = console.export_text().splitlines()
    assert len(lines) == 4 and max(len(x) for x in lines) <= 80, lines  # one line per job, nothing wraps
    assert lines[2].split()[:2] == ["12345678_12", "PENDING"]
    assert lines[2].split()[-6:] == ["1d01h/2d00h", "123k/1.0M", "12.35", "1.2M", "4d15h", "█▇▇▆▅▅▄▄▃▂▂▁"]
    assert lines[3].split() == ["4242", "RUNNING", "23h02m/1d00h", "1200/5000", "2.5", "40.0k", "1h00m", "█▅▁"]

    console = Console(width=60, force_terminal=True, no_color=True, record=True)
    console.print(live.table(rows, "hpclaunch watch", 60))
    lines = [x.rstrip() for x in console.export_text().splitlines()]
    assert max(len(x) for x in lines) <= 60 and lines[-1] == "not shown at this width: ETA, loss trend", lines
    assert lines[2].split()[:2] == ["12345678_12", "PENDING"]  # the id whole, the state cut short, the numbers whole
    assert lines[2].split()[-4:] == ["1d01h/2d00h", "123k/1.0M", "12.35", "1.2M"]


@pytest.fixture
def gpt2_run(hpclaunch, hpc_home) -> tuple[str, Path]:
    """A finished GPT-2 tiny job: STEPS steps, loss logged every step."""
    result = hpclaunch("submit", str(REPO / "recipes" / "gpt2"), "--preset", "tiny", "--profile", "local",
                       "--set", f"train.max_steps={STEPS}", "--set", "train.log_every=1",
                       "--set", "train.save_every=0", "--set", "train.eval_every=0", "--follow")
    assert result.exit_code == 0, result.output
    (job,) = [line.split()[1] for line in result.output.splitlines() if line.startswith("job local-")]
    status = json.loads(hpclaunch("status", job, "--json").stdout)
    return job, Path(status["run_dir"])


def _losses(run_dir: Path) -> list[float]:
    lines = RunFiles(run_dir).metrics_file(0).read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r.get("kind") == "train"]


@pytest.mark.slow
def test_watch_frame_of_a_real_run(hpclaunch, gpt2_run, monkeypatch):
    job, run_dir = gpt2_run
    losses = _losses(run_dir)
    assert len(losses) == STEPS

    # piped: one plain line per job, the numbers of the metrics file
    piped = hpclaunch("watch", job, "--once")
    assert piped.exit_code == 0, piped.output
    (line,) = piped.stdout.splitlines()
    assert re.fullmatch(rf"\d\d:\d\d:\d\d {job} COMPLETED elapsed [\d.]+s step {STEPS}/{STEPS} "
                        rf"loss {losses[-1]:.4g} tok/s [\d.]+k?", line), line

    # the library's row: the whole loss tail, no ETA for a finished job; the ETA at the run's own pace
    (row,) = watch.frame([], [job])
    assert row.losses == pytest.approx(losses) and row.eta_s is None and row.finished
    train = watch._train_records(run_dir)
    pace = (train[-1]["time"] - train[0]["time"]) / (STEPS - 1)
    assert watch._eta(train, 2 * STEPS) == pytest.approx(STEPS * pace)

    # on an 80-column terminal: the table fits, with the sparkline of the losses
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    shown = re.sub(r"\x1b\[[0-9;]*m", "", hpclaunch("watch", "--once").stdout)
    lines = shown.splitlines()
    assert max(len(x) for x in lines) <= 80, shown
    assert lines[0].startswith("hpclaunch watch") and lines[1].split()[:3] == ["job", "state", "elapsed/limit"]
    cells = next(x for x in lines if x.startswith(job)).split()
    assert cells[1] == "COMPLETED" and re.fullmatch(r"[\d.]+s", cells[2]), shown  # local jobs: no time limit
    assert cells[3:5] == [f"{STEPS}/{STEPS}", f"{losses[-1]:.4g}"], shown
    assert cells[-1] == watch.sparkline(losses) and len(cells[-1]) == STEPS



def test_without_jobs_it_says_so(hpclaunch):
    result = hpclaunch("watch", "--once")
    assert result.exit_code == 0 and result.stdout == "" and "no jobs recorded yet" in result.stderr


def test_a_bad_interval_is_a_clear_error(hpclaunch):
    for args in (("watch", "--interval", "0"), ("jobs", "--watch", "--interval", "-1")):
        result = hpclaunch(*args)
        assert result.exit_code == 2 and "must be more than 0 seconds" in result.stderr, result.output
