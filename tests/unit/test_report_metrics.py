"""`hpclaunch report` and `hpclaunch compare` on metrics JSON lines."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli.main import cli
from hpclaunch.report.metrics import last_metrics, load, loss_diff
from tests.fixtures.jobrecords import add_local_record


def write_metrics(run: Path, losses: list[float], extra: str = "") -> Path:
    p = run / "metrics" / "rank-0.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "step": i + 1,
                "loss": loss,
                "lr": 1e-3 * (i + 1),
                "grad_norm": 0.5,
                "tokens_per_s": 1000.0 + i,
                "samples_per_s": 4.0,
                "peak_mem_bytes": 2**30,
                "new_field": {"x": 1},
            }
        )
        for i, loss in enumerate(losses)
    ]
    lines.insert(2, json.dumps({"step": 2, "eval_loss": 2.5, "perplexity": 12.18}))
    p.write_text("\n".join(lines) + "\n" + extra)
    return p


def _record(job: str, run: Path) -> None:
    add_local_record(job, run, "gpt2", "tiny")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path / "home"))
    return tmp_path


def test_load_keeps_last_record_of_a_repeated_step_and_skips_junk(tmp_path: Path) -> None:
    # a requeued run resumes from step 2's checkpoint and writes steps 3.. again
    p = write_metrics(
        tmp_path,
        [4.0, 3.0, 2.0, 1.5],
        extra='{"step": 3, "loss": 1.9}\nnot json\n[1, 2]\n{"step": 4, "loss": NaN}\n',
    )
    m = load(p)
    steps, losses = m.series("loss")
    assert steps == [1, 2, 3] and losses == [4.0, 3.0, 1.9]  # NaN loss of step 4 is left out of the plot
    assert m.skipped == 2 and m.evals == [{"step": 2, "eval_loss": 2.5, "perplexity": 12.18}]
    assert last_metrics(tmp_path)["step"] == 4


def test_report_writes_pngs_whose_data_match_the_file(home: Path) -> None:
    losses = [4.0, 3.2, 2.7, 2.5, 2.4]
    write_metrics(home / "run", losses)
    _record("local-1", home / "run")
    res = CliRunner().invoke(cli, ["report", "local-1", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert [Path(p).name for p in info["plots"]] == ["loss.png", "lr.png", "tokens_per_s.png"]
    for p in info["plots"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert info["steps"] == 5 and info["last_loss"] == 2.4 and info["min_loss"] == 2.4
    assert info["eval_loss"] == 2.5 and info["mean_tokens_per_s"] == pytest.approx(1002.0)
    # the plotted line holds exactly the file's values (kept in each PNG's Description text chunk)
    from PIL import Image

    plotted = json.loads(Image.open(info["plots"][0]).text["Description"])
    assert plotted == {"step": [1, 2, 3, 4, 5], "loss": losses}
    text = CliRunner().invoke(cli, ["report", "local-1"], catch_exceptions=False).output
    assert (
        "last_loss: 2.4" in text and "wrote " in text and (home / "run" / "report" / "summary.txt").is_file()
    )
    # words a person reads: sizes in units, no raw floats, no None (a CPU run has no MFU)
    assert "peak_mem_bytes: 1.0 GiB" in text and "mean_tokens_per_s: 1002\n" in text
    assert "None" not in text and not any(len(n) > 8 for n in re.findall(r"\d+\.\d+", text)), text


def test_status_and_report_leave_out_what_a_run_did_not_measure(home: Path) -> None:
    write_metrics(home / "run", [4.0, 3.0], extra=json.dumps({"step": 3, "loss": 0.1 + 0.2, "mfu": None}) + "\n")
    _record("local-1", home / "run")
    for command in (["report", "local-1"], ["status", "local-1"]):
        text = CliRunner().invoke(cli, command, catch_exceptions=False).output
        assert "mfu" not in text and "None" not in text and "0.30000000000000004" not in text, text


def test_compare_identical_runs_is_zero_and_different_runs_are_not(home: Path) -> None:
    losses = [4.0, 3.2, 2.7, 2.5]
    for job in ("local-1", "local-2"):
        write_metrics(home / job, losses)
        _record(job, home / job)
    write_metrics(home / "local-3", [4.0, 3.2, 2.7001, 2.5, 2.3])
    _record("local-3", home / "local-3")
    res = CliRunner().invoke(
        cli, ["compare", "local-1", "local-2", "--json", "--tolerance", "0"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["max_abs_diff"] == 0 and info["common_steps"] == 4
    assert Path(info["plot"]).read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(cli, ["compare", "local-1", "local-3", "--tolerance", "1e-5"])
    assert res.exit_code == 1
    assert "max abs loss difference: 0.0001" in res.output and "only in local-3: 1" in res.output
    assert loss_diff(
        load(home / "local-1/metrics/rank-0.jsonl"), load(home / "local-3/metrics/rank-0.jsonl")
    )["diff"][2] == pytest.approx(1e-4)


def test_report_without_metrics_is_a_user_error(home: Path) -> None:
    (home / "run").mkdir()
    _record("local-1", home / "run")
    res = CliRunner().invoke(cli, ["report", "local-1"])
    assert res.exit_code == 2 and "metrics" in res.output and "Traceback" not in res.output


def test_report_on_a_core_install_without_matplotlib_names_the_extra(home: Path, monkeypatch) -> None:
    """A login node with `pip install hpclaunch` only: a clear error and the extra to install, no traceback."""
    write_metrics(home / "run", [4.0, 3.0])
    _record("local-1", home / "run")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what Python does for a module that is not there
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    res = CliRunner().invoke(cli, ["report", "local-1"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "pip install 'hpclaunch[report]'" in res.stderr and "matplotlib" in res.stderr
