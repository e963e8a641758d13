"""`hpclaunch resume JOB` on real local jobs (their job scripts replaced by a few lines of bash): a failed job goes
on from its checkpoint as a new job in the same run directory, with the next restart number, recorded as the
old one's continuation and shown as a chain by `status` and `jobs`; what cannot be resumed is refused with exit 2
and queues nothing; `--from-scratch` starts over in a new run directory; an interrupted resume keeps the run
directory. (A real training job resumed: tests/integration/test_resume.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpclaunch.state import registry
from tests.fixtures.jobrecords import start_local_job, wait_local

# Fails in its first run after writing a checkpoint; any later run (restart 1, 2, ...) completes.
_FAILS_FIRST = """echo "$HPCLAUNCH_JOB_ID restart=$HPCLAUNCH_RESTART" >> seen.txt
mkdir -p checkpoints/step-00000004 checkpoints/step-00000008
[ "$HPCLAUNCH_RESTART" = 0 ] && exit 3
exit 0"""


def _records(hpc_home: Path) -> list[str]:
    return sorted(p.stem for p in (hpc_home / "registry").glob("*.json"))


def test_a_failed_job_goes_on_from_its_newest_checkpoint_as_its_recorded_continuation(hpclaunch, hpc_home):
    old, run_dir = start_local_job(hpclaunch, _FAILS_FIRST)
    assert wait_local(old) == "FAILED"
    result = hpclaunch("resume", old, "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    new, link = done["job_id"], done["resumes"]
    assert done["resumed_state"] == "FAILED" and done["run_dir"] == str(run_dir)
    assert link == {"job": old, "checkpoint": str(run_dir / "checkpoints" / "step-00000008"), "step": 8,
                    "restart": 1, "from_scratch": False}
    assert wait_local(new) == "COMPLETED"
    # the same job script in the same run directory, its restarts numbered after the old job's
    assert (run_dir / "seen.txt").read_text().splitlines() == [f"{old} restart=0", f"{new} restart=1"]
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == [f"job.{old}.out", f"job.{new}.out"]
    record = json.loads((hpc_home / "registry" / f"{new}.json").read_text())
    assert record["run_dir"] == str(run_dir) and record["resumes"] == link
    assert "resumes" not in json.loads((hpc_home / "registry" / f"{old}.json").read_text())

    # the chain, as status and jobs show a --retries chain
    out = hpclaunch("status", old).stdout
    assert f"resumed: {old} -> {new} (COMPLETED) from its checkpoint at step 8" in out
    assert f"resumes job {old} from its checkpoint at step 8" in hpclaunch("status", new).stdout
    rows = {line.split("\t")[0]: line.split("\t") for line in hpclaunch("jobs").stdout.splitlines()[1:]}
    assert rows[old][4] == f"FAILED -> {new} COMPLETED"
    assert rows[new][4] == f"COMPLETED (resumes {old})"
    view = json.loads(hpclaunch("status", new, "--json").stdout)
    assert view["resumes"]["job"] == old and view["state"] == "COMPLETED"
    assert json.loads(hpclaunch("status", old, "--json").stdout)["latest"]["state"] == "COMPLETED"

    # the chain's newest job completed: nothing is left to resume, by either id
    for job in (old, new):
        again = hpclaunch("resume", job)
        assert again.exit_code == 2, again.output
        assert "COMPLETED: it ran to its end, there is nothing to resume" in again.stderr
    assert f"job {new} (the newest of job {old}'s chain) COMPLETED" in hpclaunch("resume", old).stderr


@pytest.mark.parametrize(("script", "state", "message", "hint"), [
    ("sleep 60", "RUNNING", "is still RUNNING: it has not stopped yet", "or stop it first: hpclaunch cancel {job}"),
    ("mkdir -p checkpoints/step-00000002; exit 0", "COMPLETED", "COMPLETED: it ran to its end",
     "to run it again from the start: hpclaunch submit {run_dir}/resolved.yaml"),
    ("mkdir -p checkpoints/.tmp-step-00000002; exit 1", "FAILED", "(FAILED) wrote no checkpoint",
     "start it over from its resolved.yaml: hpclaunch resume {job} --from-scratch"),
])
def test_what_cannot_be_resumed_is_refused_and_queues_nothing(hpclaunch, hpc_home, script, state, message, hint):
    job, run_dir = start_local_job(hpclaunch, script)
    assert wait_local(job, until=state if state == "RUNNING" else "finished") == state
    before = _records(hpc_home)
    result = hpclaunch("resume", job)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and hint.format(job=job, run_dir=run_dir) in result.stderr
    assert "Traceback" not in result.output and _records(hpc_home) == before
    if state == "RUNNING":
        hpclaunch("cancel", job)


def test_a_script_that_does_not_resume_is_refused_unless_from_scratch(hpclaunch, hpc_home):
    job, run_dir = start_local_job(hpclaunch, "mkdir -p checkpoints/step-00000002; exit 1")
    assert wait_local(job) == "FAILED"
    resolved = yaml.safe_load((run_dir / "resolved.yaml").read_text())
    (run_dir / "resolved.yaml").write_text(yaml.safe_dump({**resolved, "resumable": False}, sort_keys=False))
    result = hpclaunch("resume", job)
    assert result.exit_code == 2 and "checkpoint.resumable is false" in result.stderr, result.output
    assert f"hpclaunch resume {job} --from-scratch" in result.stderr


def test_from_scratch_starts_its_resolved_yaml_over_in_a_new_run_directory(hpclaunch, hpc_home):
    old, run_dir = start_local_job(hpclaunch, "exit 1")
    assert wait_local(old) == "FAILED"
    result = hpclaunch("resume", old, "--from-scratch", "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    new, new_dir = done["job_id"], Path(done["run_dir"])
    assert hpclaunch("cancel", new).exit_code == 0  # the real allreduce recipe: no need to let it run
    assert new_dir != run_dir and (new_dir / "job.sbatch").is_file()
    assert done["resumes"] == {"job": old, "checkpoint": None, "step": None, "restart": 0, "from_scratch": True}
    assert json.loads((hpc_home / "registry" / f"{new}.json").read_text())["resumes"]["from_scratch"] is True
    assert f"resumed: {old} -> {new} (" in hpclaunch("status", old).stdout
    assert "from scratch" in hpclaunch("status", new).stdout


def test_exclude_is_refused_on_the_local_scheduler(hpclaunch, hpc_home):
    job, _ = start_local_job(hpclaunch, _FAILS_FIRST)
    assert wait_local(job) == "FAILED"
    before = _records(hpc_home)
    result = hpclaunch("resume", job, "--exclude", "node7")
    assert result.exit_code == 2, result.output
    assert "the local scheduler runs the job on this machine: there are no nodes to exclude" in result.stderr
    assert _records(hpc_home) == before


def test_a_sweep_is_resumed_element_by_element(hpclaunch, hpc_home):
    registry.add(registry.JobRecord("local-7", "local", "local", "allreduce", None, "torchrun", "1n1g", "allreduce",
                                    str(hpc_home / "runs" / "sweep"), "2026-11-22T07:00:00+0000",
                                    sweep={"id": "local-7", "keys": ["train.lr"], "elements": ["local-7_0"]}))
    result = hpclaunch("resume", "local-7")
    assert result.exit_code == 2 and "local-7 is a sweep: resume its elements one by one" in result.stderr


def test_an_interrupted_resume_keeps_the_run_directory(hpclaunch, hpc_home):
    """A resume killed before the scheduler answered leaves a pending record naming the old job's run directory:
    settling it must record nothing and remove nothing (a plain submit's run directory would be removed)."""
    from dataclasses import replace

    job, run_dir = start_local_job(hpclaunch, _FAILS_FIRST)
    assert wait_local(job) == "FAILED"
    pending = registry.begin(replace(registry.get(job), resumes={"job": job, "checkpoint": "x", "step": 8,
                                                                   "restart": 1, "from_scratch": False}))
    pending._handle.close()  # the resume died: its lock is gone, its record stays
    listed = hpclaunch("jobs")
    assert f"the resume of job {job} was stopped before the scheduler answered" in listed.stderr, listed.output
    assert run_dir.is_dir() and (run_dir / "checkpoints" / "step-00000008").is_dir()
    assert _records(hpc_home) == [job]


def test_the_python_api_resumes_as_the_command_does(hpclaunch, hpc_home):
    import hpclaunch as api

    old, run_dir = start_local_job(hpclaunch, _FAILS_FIRST)
    assert wait_local(old) == "FAILED"
    new = api.job(old).resume()
    assert new.run_dir == run_dir and new.job_id != old
    assert new.wait(timeout=30).state == "COMPLETED"
    assert new.describe()["resumes"]["job"] == old
