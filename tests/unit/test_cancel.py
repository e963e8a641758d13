"""`hpclaunch cancel JOB...` on real local jobs: a running job is cancelled, one that already ended is left
alone and said to have ended (state, when) with exit 0, several ids and a sweep id, --json; and
`submit --parsable` prints only the job id."""

from __future__ import annotations

import json
import re

from tests.fixtures.jobrecords import start_local_job, wait_local


def test_cancel_of_a_job_that_already_ended_says_so_and_exits_0(hpclaunch):
    job_id, _ = start_local_job(hpclaunch, "exit 0")
    assert wait_local(job_id) == "COMPLETED"
    result = hpclaunch("cancel", job_id)
    assert result.exit_code == 0, result.output
    assert re.fullmatch(rf"job {job_id} had already ended: COMPLETED at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d; "
                        r"nothing to cancel\n", result.stdout), result.stdout
    assert wait_local(job_id) == "COMPLETED"  # not turned into CANCELLED


def test_cancel_several_jobs_running_and_ended_with_json(hpclaunch):
    running, _ = start_local_job(hpclaunch, "sleep 60")
    failed, _ = start_local_job(hpclaunch, "exit 3")
    assert wait_local(running, until="RUNNING") == "RUNNING"
    assert wait_local(failed) == "FAILED"
    result = hpclaunch("cancel", running, failed, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == 1
    first, second = data["jobs"]
    assert first["job_id"] == running and first["cancelled"] and first["state"] == "RUNNING"
    assert second["job_id"] == failed and not second["cancelled"] and second["already_ended"]
    assert second["state"] == "FAILED" and second["ended"]
    assert wait_local(running) == "CANCELLED"
    text = hpclaunch("cancel", running).stdout
    assert f"job {running} had already ended: CANCELLED at " in text


def test_an_unknown_id_cancels_nothing(hpclaunch):
    running, _ = start_local_job(hpclaunch, "sleep 60")
    assert wait_local(running, until="RUNNING") == "RUNNING"
    result = hpclaunch("cancel", running, "local-999")
    assert result.exit_code == 2 and "local-999" in result.stderr
    assert wait_local(running, until="RUNNING", timeout=0) == "RUNNING"
    assert hpclaunch("cancel", running).stdout == f"cancelled job {running} (it was RUNNING)\n"


def test_cancel_a_sweep_by_its_id(hpclaunch):
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--sweep", "train.lr=1,2", "--max-parallel", "1",
                       "--dry-run", "--json")
    info = json.loads(result.stdout)
    from pathlib import Path

    for element in info["elements"]:
        (Path(element["run_dir"]) / "job.sbatch").write_text("#!/bin/bash\nsleep 60\n")
    from tests.unit.test_sweeps import _submit_local

    sweep, ids = _submit_local(info, 1)
    assert wait_local(ids[0], until="RUNNING") == "RUNNING"
    result = hpclaunch("cancel", sweep)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"cancelled sweep {sweep} (2 elements) (it was RUNNING)\n"
    assert {wait_local(i) for i in ids} == {"CANCELLED"}


def test_submit_parsable_prints_only_the_job_id(hpclaunch):
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--parsable")
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    assert re.fullmatch(r"local-\d+", job_id) and result.stdout == job_id + "\n"
    assert wait_local(job_id, timeout=120) == "COMPLETED"
    refused = hpclaunch("submit", "allreduce", "--profile", "local", "--parsable", "--dry-run")
    assert refused.exit_code == 2 and "--parsable" in refused.stderr
