"""`jobs` on a terminal fits 80 and 60 columns with the job id, name and state whole, piped it keeps every
column; elapsed is filled for finished local jobs in squeue's format; `status` without a job shows the newest
ones."""

from __future__ import annotations

import re

import pytest

from tests.fixtures.jobrecords import add_local_record, start_local_job, wait_local


@pytest.fixture
def two_jobs(hpclaunch):
    done, _ = start_local_job(hpclaunch, "sleep 1.2", ("--name", "bert-large-wikitext-zero3"))
    failed, _ = start_local_job(hpclaunch, "exit 3", ("--set", "train.lr=3e-4"))
    assert wait_local(done) == "COMPLETED" and wait_local(failed) == "FAILED"
    return done, failed


def test_jobs_piped_has_every_column_and_the_elapsed_of_finished_jobs(hpclaunch, two_jobs):
    done, failed = two_jobs
    lines = hpclaunch("jobs").stdout.splitlines()
    assert lines[0].split("\t") == ["job", "recipe", "profile", "layout", "state", "elapsed", "last loss",
                                    "submitted", "name"]
    row = dict(zip(lines[0].split("\t"), lines[1].split("\t"), strict=True))
    assert row["job"] == done and row["state"] == "COMPLETED" and row["name"] == "bert-large-wikitext-zero3"
    assert re.fullmatch(r"0:0[12]", row["elapsed"])  # squeue's format, as for Slurm jobs
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row["submitted"])
    row = dict(zip(lines[0].split("\t"), lines[2].split("\t"), strict=True))
    assert row["state"] == "FAILED" and re.fullmatch(r"0:0\d", row["elapsed"])


@pytest.mark.parametrize("width", [80, 60])
def test_jobs_on_a_terminal_fits_the_width_with_the_id_and_name_whole(hpclaunch, two_jobs, monkeypatch, width):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    out = re.sub(r"\x1b\[[0-9;]*m", "", hpclaunch("jobs").stdout)  # what the terminal shows (the header is bold)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    assert lines[0].split()[:4] == ["job", "name", "state", "recipe"], out
    done, failed = two_jobs
    row = rf"^{done}\s+bert-large-wikitext-zero3\s+COMPLETED\s+allreduce"
    if width == 80:  # the submit time falls off the right, the elapsed time stays whole
        assert re.search(rf"{row}\s+0:0[12]\s*$", out, re.M), out
        assert lines[-1].rstrip() == "not shown at this width: submitted", out
    else:
        assert re.search(rf"{row}\s*$", out, re.M), out
    assert re.search(rf"^{failed}\s.*\sFAILED\s", out, re.M), out


def test_status_without_a_job_shows_the_10_newest(hpclaunch, hpc_home, two_jobs):
    for n in range(100, 112):
        add_local_record(f"local-{n}", hpc_home / "gone", recipe=f"old{n}")
    # the records above were submitted earlier (2026-11-22) than the two real jobs
    result = hpclaunch("status")
    shown = re.findall(r"^job (\S+) ", result.stdout, re.M)
    assert len(shown) == 10 and shown[-2:] == list(two_jobs), result.stdout
    assert "the 10 newest of 14 jobs (`hpclaunch status --all` for all)" in result.stderr
    assert len(re.findall(r"^job ", hpclaunch("status", "--all").stdout, re.M)) == 14
