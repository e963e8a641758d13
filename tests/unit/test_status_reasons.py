"""Pending reasons in words; `status` and `jobs` output with the last metrics; one scheduler call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli.main import cli
from hpclaunch.schedulers.slurm.reasons import explain, words
from tests.fixtures.jobrecords import add_local_record


@pytest.mark.parametrize(
    "code,expected",
    [
        ("Resources", "waiting for nodes/GPUs to become free"),
        ("Priority", "higher priority"),
        ("Dependency", "depends on"),
        ("DependencyNeverSatisfied", "can never start"),
        ("BeginTime", "start time"),
        ("JobHeldUser", "held by its owner"),
        ("JobHeldAdmin", "administrator"),
        ("ReqNodeNotAvail", "down, drained or reserved"),
        ("PartitionNodeLimit", "more nodes than the partition allows"),
        ("QOSMaxGRESPerUser", "QOS limit"),
        ("QOSGrpNodeLimit", "QOS limit"),
    ],
)
def test_reasons_in_words(code: str, expected: str) -> None:
    assert expected in explain(code)


def test_unknown_and_empty_reasons() -> None:
    assert explain("SomethingNew") == "SomethingNew"
    assert explain(None) is None and explain("None") is None
    assert words("Resources") == "waiting for nodes/GPUs to become free"


def test_status_and_jobs_show_last_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path / "home"))
    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    (run / "metrics" / "rank-0.jsonl").write_text(
        '{"step": 1, "loss": 3.5, "lr": 0.001}\n'
        '{"step": 2, "loss": 3.25, "lr": 0.001, "tokens_per_s": 20000.5}\n'
        '{"step": 2, "eval_loss": 3.1, "perplexity": 22.2}\n'
    )
    add_local_record("local-9", run, "gpt2", "tiny")
    res = CliRunner().invoke(cli, ["status", "local-9"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "recipe gpt2:tiny on local, layout 1n2g" in res.output
    assert (
        "last metrics: step 2  loss 3.25  lr 0.001  tokens_per_s 20000  eval_loss 3.1  perplexity 22.2"
        in res.output
    )
    data = json.loads(CliRunner().invoke(cli, ["status", "local-9", "--json"]).output)
    assert data["job_id"] == "local-9" and data["last_metrics"]["perplexity"] == 22.2
    res = CliRunner().invoke(cli, ["jobs"], catch_exceptions=False)
    assert "local-9\tgpt2:tiny\tlocal\t1n2g" in res.output and "\t3.25\t" in res.output
    assert json.loads(CliRunner().invoke(cli, ["jobs", "--json"]).output)[0]["recipe"] == "gpt2"


def test_a_pending_job_shows_its_reason_and_the_start_the_scheduler_expects():
    from hpclaunch.schedulers.base import JobStatus

    soon = JobStatus("7", "PENDING", "Resources", expected_start="2026-11-29T03:10:00")
    assert soon.pending_text(today="2026-11-29") == "Resources, ~03:10"
    assert soon.pending_text(today="2026-11-28") == "Resources, ~11-29 03:10"  # another day: its date too
    assert JobStatus("8", "PENDING", "Priority").pending_text() == "Priority"  # no estimate yet
    assert JobStatus("9", "RUNNING", expected_start="2026-11-29T03:10:00").pending_text() == ""
