"""Issue 23 items 3 and 9: the USR1 lead time and requeue are settings (profile `checkpoint:`, recipe, --set),
checked before anything is written and shown in the dry run; `requeue: false` chains a follow-on job. The job
script's end part (after the ranks stopped on their own before the time limit) runs under bash here with
stand-ins for sbatch and scontrol."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from hpclaunch.schedulers import get_scheduler
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission.render import _environment
from hpclaunch.submission.resolve import CliOverrides, resolve
from tests.unit.test_resources import refused, sbatch_lines

PROFILE = Path(__file__).resolve().parents[2] / "cluster_profiles" / "dev-slurm.yaml"


def _profile(tmp_path: Path, **checkpoint: object) -> Path:
    data = yaml.safe_load(PROFILE.read_text())
    data["checkpoint"] = checkpoint
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _dry(hpclaunch, *args: str, profile: str = "dev-slurm"):
    r = hpclaunch("submit", "allreduce", "--profile", profile, "--time", "01:00:00", "--dry-run", *args)
    assert r.exit_code == 0, r.output
    return r


def test_the_lead_time_comes_from_the_profile_and_set_wins(hpclaunch, tmp_path):
    site = _dry(hpclaunch, profile=str(_profile(tmp_path, lead_time=600)))
    assert "#SBATCH --signal=B:USR1@600" in sbatch_lines(site.stdout)
    assert "USR1 600 s before it is the backstop (checkpoint.lead_time)" in site.stderr
    assert "# USR1 600 s before the limit is the backstop; then the job requeues itself." in site.stdout
    mine = _dry(hpclaunch, "--set", "checkpoint.lead_time=900", profile=str(_profile(tmp_path, lead_time=600)))
    assert "#SBATCH --signal=B:USR1@900" in sbatch_lines(mine.stdout)


def test_a_job_too_short_for_the_lead_time_gets_no_signal_and_says_so(hpclaunch):
    r = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--time", "2", "--dry-run")
    assert r.exit_code == 0, r.output
    assert not any(x.startswith("#SBATCH --signal") for x in sbatch_lines(r.stdout))
    assert "# no USR1 (a job this short, or one that does not resume)" in r.stdout


@pytest.mark.parametrize("value, words", [
    ("abc", ["--set checkpoint.lead_time=abc", "valid integer"]),
    ("5", ["checkpoint.lead_time", "greater than or equal to 10"]),
    ("70000", ["checkpoint.lead_time", "less than or equal to 65535"]),
    ("3600", ["checkpoint.lead_time: 3600 s is not shorter than the time limit 01:00:00",
              "ask for a longer --time"]),
])
def test_a_nonsense_lead_time_is_refused_before_anything_is_written(hpclaunch, hpc_home, value, words):
    r = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--time", "01:00:00", "--dry-run",
                  "--set", f"checkpoint.lead_time={value}")
    refused(r, hpc_home, *words)


def test_a_profile_s_bad_settings_name_the_file_and_key(hpclaunch, hpc_home, tmp_path):
    bad = _profile(tmp_path, lead_time=-1)
    refused(hpclaunch("submit", "allreduce", "--profile", str(bad), "--dry-run"), hpc_home, str(bad),
            "checkpoint.lead_time")
    data = yaml.safe_load(PROFILE.read_text())
    data["storage"] = {"write_gbps": 0}
    bad.write_text(yaml.safe_dump(data))
    refused(hpclaunch("submit", "allreduce", "--profile", str(bad), "--dry-run"), hpc_home, "storage.write_gbps")
    data["storage"] = {"write_gbs": 1}
    bad.write_text(yaml.safe_dump(data))
    refused(hpclaunch("submit", "allreduce", "--profile", str(bad), "--dry-run"), hpc_home, "write_gbs",
            "write_gbps")


def test_requeue_false_chains_a_follow_on_instead_and_set_can_turn_it_back(hpclaunch, tmp_path):
    site = str(_profile(tmp_path, requeue=False))
    r = _dry(hpclaunch, profile=site)
    lines = sbatch_lines(r.stdout)
    assert "#SBATCH --no-requeue" in lines and "#SBATCH --signal=B:USR1@120" in lines
    assert "scontrol requeue" not in r.stdout and 'chain_job "USR1 (preemption or the time limit near)"' in r.stdout
    assert "then the job chains a follow-on job that resumes (checkpoint.requeue false)" in r.stderr
    back = _dry(hpclaunch, "--set", "checkpoint.requeue=true", profile=site)
    assert "#SBATCH --requeue" in sbatch_lines(back.stdout) and "chain_job" not in back.stdout


def test_slurm_rest_times_its_own_usr1_by_the_lead_time(tmp_path, hpc_home):
    spec = resolve("allreduce", "dev-slurm-rest", CliOverrides(time="01:00:00", sets=("checkpoint.lead_time=300",)))
    ctx = get_scheduler("slurm-rest").script_context(spec, tmp_path)
    assert ctx["warn_after"] == 3600 - 300 and not any("--signal" in o for o in ctx["options"])


def _fake_sbatch(tmp_path: Path, run_dir: Path) -> Path:
    """An sbatch on PATH (the job runs it through env) that records its arguments and answers a job id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text(f"#!/bin/bash\necho \"sbatch $*\" >> {run_dir}/calls\necho '4242;cluster'\n")
    fake.chmod(0o755)
    return bin_dir


def _end_part(tmp_path: Path, sets: tuple[str, ...], *, new_checkpoint: bool, stopped: bool = True) -> tuple[str, Path]:
    """signals.sh.j2 (for chain_job) and end.sh.j2 under bash after a launch that exited 0."""
    spec = resolve("allreduce", "dev-slurm", CliOverrides(time="01:00:00", sets=sets))
    run_dir = tmp_path / "run"
    files = RunFiles(run_dir)
    files.progress.mkdir(parents=True)
    if stopped:
        files.stopped(0).write_text("{}")
    (files.checkpoints / "step-00000010").mkdir(parents=True)
    ctx = {"sched": get_scheduler("slurm").script_context(spec, run_dir), "files": files, "spec": spec}
    env = _environment(spec)
    parts = [env.get_template(f"schedulers/slurm/{name}.sh.j2").render(ctx) for name in ("signals", "end")]
    text = "\n".join([
        "hpclaunch_stamp() { echo \"stamp $*\"; }",
        f"scontrol() {{ echo \"scontrol $*\" >> {run_dir}/calls; }}",
        f"export PATH={_fake_sbatch(tmp_path, run_dir)}:$PATH",
        f"export HPCLAUNCH_JOB_ID=7 SLURM_JOB_ID=7 HPCLAUNCH_RESTART=0 HPCLAUNCH_RUN_DIR={run_dir}",
        f"newest={files.checkpoints}/" + ("step-00000005" if new_checkpoint else "step-00000010"),
        "sleep 60 & LAUNCH_PID=$!",
        *parts[:1],
        "kill $LAUNCH_PID; rc=0",
        *parts[1:],
        "echo 'fell through'; exit 9",
    ])
    proc = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 or not stopped, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr, run_dir


def test_stopped_before_the_end_the_job_chains_a_follow_on_and_records_it(tmp_path, hpc_home):
    out, run_dir = _end_part(tmp_path, ("checkpoint.requeue=false",), new_checkpoint=True)
    calls = (run_dir / "calls").read_text()
    assert "sbatch --parsable --dependency=afterany:7 --export=ALL,HPCLAUNCH_RESTART_BASE=1 " in calls, calls
    assert "scontrol" not in calls
    (entry,) = [json.loads(x) for x in RunFiles(run_dir).retries.read_text().splitlines()]
    assert entry["from"] == "7" and entry["to"] == "4242" and entry["chain"] is True
    assert entry["reason"] == "saved before the time limit"
    assert "follow-on job 4242 resumes once this one ends" in out and "stamp submitted  1 4242" in out


def test_a_chain_without_a_new_checkpoint_ends(tmp_path, hpc_home):
    out, run_dir = _end_part(tmp_path, ("checkpoint.requeue=false",), new_checkpoint=False)
    assert not (run_dir / "calls").exists() and not RunFiles(run_dir).retries.exists()
    assert "no new checkpoint since this job started" in RunFiles(run_dir).stop_reason.read_text()


def test_stopped_before_the_end_a_requeueing_job_requeues(tmp_path, hpc_home):
    out, run_dir = _end_part(tmp_path, (), new_checkpoint=True)
    assert (run_dir / "calls").read_text() == "scontrol requeue 7\n"
    assert "saved before the time limit: requeueing job 7" in out


def test_a_launch_that_finished_is_neither_requeued_nor_chained(tmp_path, hpc_home):
    out, run_dir = _end_part(tmp_path, ("checkpoint.requeue=false",), new_checkpoint=True, stopped=False)
    assert "fell through" in out and not (run_dir / "calls").exists()
