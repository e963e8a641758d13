"""Requeue and the USR1 warning (issue 22, 3.2 and 3.3): a --sbatch option that conflicts with one hpclaunch
writes replaces it, in the script's logic too (no-requeue: no --requeue line and no `scontrol requeue` on USR1,
the job checkpoints and ends; signal=B:USR1@N: that lead time), or is refused naming the setting to use; and only
a job that can resume requeues: a recipe folder, or your own script that says it resumes (checkpoint.resumable).
The stop and requeue handlers run under bash here with a stand-in launch and scontrol."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpclaunch.schedulers import get_scheduler
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission.render import _environment
from hpclaunch.submission.resolve import CliOverrides, resolve
from tests.unit.test_resources import refused, sbatch_lines

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "scripts" / "plain_allreduce.py"


def _submit(hpclaunch, *args: str):
    r = hpclaunch("submit", *args, "--profile", "dev-slurm", "--time", "01:00:00", "--dry-run")
    assert r.exit_code == 0, r.output
    return r


def test_a_recipe_requeues_on_usr1_two_minutes_before_its_limit(hpclaunch):
    r = _submit(hpclaunch, "allreduce")
    lines = sbatch_lines(r.stdout)
    assert {"#SBATCH --requeue", "#SBATCH --signal=B:USR1@120"} <= set(lines)
    assert "#SBATCH --no-requeue" not in lines
    assert 'scontrol requeue "$HPCLAUNCH_JOB_ID"' in r.stdout and "stop_job" not in r.stdout


def test_sbatch_no_requeue_replaces_requeue_and_the_job_checkpoints_and_ends(hpclaunch):
    r = _submit(hpclaunch, "allreduce", "--sbatch", "no-requeue")
    lines = sbatch_lines(r.stdout)
    assert "#SBATCH --no-requeue" in lines and "#SBATCH --requeue" not in lines
    assert "#SBATCH --signal=B:USR1@120" in lines  # still warned: it saves a checkpoint before the limit
    assert "scontrol requeue" not in r.stdout and "requeue_job" not in r.stdout
    assert "trap stop_job USR1" in r.stdout


def test_a_resubmission_s_sbatch_goes_over_the_recorded_one(hpclaunch, hpc_home):
    seen: set[Path] = set()

    def newest() -> Path:
        (fresh,) = set((hpc_home / "runs").glob("*/resolved.yaml")) - seen
        seen.add(fresh)
        return fresh

    _submit(hpclaunch, "allreduce", "--sbatch", "no-requeue")
    for flag, line, other in (("requeue", "#SBATCH --requeue", "#SBATCH --no-requeue"),
                              ("no-requeue", "#SBATCH --no-requeue", "#SBATCH --requeue")):
        again = hpclaunch("submit", str(newest()), "--sbatch", flag, "--dry-run")
        assert again.exit_code == 0, again.output
        assert line in sbatch_lines(again.stdout) and other not in sbatch_lines(again.stdout)


def test_sbatch_signal_sets_the_lead_time(hpclaunch):
    r = _submit(hpclaunch, "allreduce", "--sbatch", "signal=B:USR1@600")
    assert [x for x in sbatch_lines(r.stdout) if x.startswith("#SBATCH --signal")] == ["#SBATCH --signal=B:USR1@600"]
    assert "#SBATCH --requeue" in sbatch_lines(r.stdout)


def test_the_profiles_no_requeue_is_replaced_by_sbatch_requeue(hpclaunch, tmp_path):
    import yaml

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["sbatch_extra"] = {"no-requeue": None}
    profile = tmp_path / "norequeue.yaml"
    profile.write_text(yaml.safe_dump(data))
    site = hpclaunch("submit", "allreduce", "--profile", str(profile), "--time", "01:00:00", "--dry-run")
    assert "#SBATCH --no-requeue" in sbatch_lines(site.stdout) and "#SBATCH --requeue" not in sbatch_lines(site.stdout)
    assert f"profile {profile.stem} sbatch_extra no-requeue" in site.stdout
    mine = hpclaunch("submit", "allreduce", "--profile", str(profile), "--time", "01:00:00", "--dry-run",
                     "--sbatch", "requeue")
    assert "#SBATCH --requeue" in sbatch_lines(mine.stdout) and "#SBATCH --no-requeue" not in sbatch_lines(mine.stdout)
    assert "scontrol requeue" in mine.stdout


@pytest.mark.parametrize("args, words", [
    (("--sbatch", "signal=USR1@600"), ["'USR1@600' is not a signal the job acts on",
                                       "--sbatch signal=B:USR1@SECONDS"]),
    (("--sbatch", "signal=B:TERM@60"), ["is not a signal the job acts on"]),
    (("--sbatch", "signal"), ["is not a signal the job acts on"]),
    (("--sbatch", "signal=B:USR1@70000"), ["is not a signal the job acts on"]),
    (("--sbatch", "signal=B:USR1@3000"), ["--sbatch signal=B:USR1@3000: the job would be warned 10 min after it "
                                          "starts (time limit 01:00:00)", "ask for --time 01:03:00 or more"]),
    (("--sbatch", "requeue", "--sbatch", "no-requeue"), ["--sbatch no-requeue and requeue: sbatch takes one of them"]),
    ((str(SCRIPT), "--sbatch", "requeue"), ["--sbatch requeue: the script of plain_allreduce does not resume from a "
                                            "checkpoint", "--set checkpoint.resumable=true"]),
])
def test_a_conflicting_option_is_refused_naming_what_to_use(hpclaunch, hpc_home, args, words):
    first = () if args[0].endswith(".py") else ("allreduce",)
    r = hpclaunch("submit", *first, *args, "--profile", "dev-slurm", "--time", "01:00:00", "--dry-run")
    refused(r, hpc_home, *words)


def test_your_own_script_is_not_requeued_unless_it_says_it_resumes(hpclaunch, hpc_home):
    plain = _submit(hpclaunch, str(SCRIPT))
    lines = sbatch_lines(plain.stdout)
    assert "#SBATCH --no-requeue" in lines and "#SBATCH --requeue" not in lines
    assert not any(x.startswith("#SBATCH --signal") for x in lines)  # it runs to its time limit
    assert "scontrol requeue" not in plain.stdout and "trap stop_job USR1" in plain.stdout
    assert "not requeued (checkpoint.resumable is false)" in plain.stderr
    resumes = _submit(hpclaunch, str(SCRIPT), "--set", "checkpoint.resumable=true")
    assert {"#SBATCH --requeue", "#SBATCH --signal=B:USR1@120"} <= set(sbatch_lines(resumes.stdout))
    assert "not requeued" not in resumes.stderr
    # it may still ask for a warning, to save and end before the limit
    warned = _submit(hpclaunch, str(SCRIPT), "--sbatch", "signal=B:USR1@300")
    assert {"#SBATCH --no-requeue", "#SBATCH --signal=B:USR1@300"} <= set(sbatch_lines(warned.stdout))


def test_a_recipe_folder_that_does_not_resume_says_so(hpclaunch):
    r = _submit(hpclaunch, "allreduce", "--set", "checkpoint.resumable=false")
    assert "#SBATCH --no-requeue" in sbatch_lines(r.stdout) and "scontrol requeue" not in r.stdout


def _handler(tmp_path: Path, launch: str, *sbatch: str, script: str = "allreduce") -> tuple[int, str, Path]:
    """The job's USR1 handling (signals.sh.j2 as rendered for the job) run under bash: `launch` stands in for
    the srun step, scontrol records its calls; the shell sends itself USR1. (exit code, output, run dir)."""
    spec = resolve(script, "dev-slurm", CliOverrides(time="01:00:00", sbatch=sbatch))
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    part = _environment(spec).get_template("schedulers/slurm/signals.sh.j2").render(
        sched=get_scheduler("slurm").script_context(spec, run_dir), files=RunFiles(run_dir), spec=spec)
    text = "\n".join([
        "hpclaunch_stamp() { echo \"stamp $1\"; }",
        f"scontrol() {{ echo \"scontrol $*\" >> {run_dir}/scontrol; }}",
        "HPCLAUNCH_JOB_ID=7 HPCLAUNCH_RESTART=0",
        f"bash -c {launch!r} &",
        "LAUNCH_PID=$!",
        "sleep 0.5",
        part,
        "kill -USR1 $$",
        "sleep 5",
        "echo 'not stopped'",
        "exit 99",
    ])
    proc = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr, run_dir


SAVES_AND_EXITS = "trap 'echo saved; exit 0' USR1; while :; do sleep 0.1; done"


def test_on_usr1_a_requeueing_job_waits_for_the_save_then_requeues(tmp_path, hpc_home):
    code, out, run_dir = _handler(tmp_path, SAVES_AND_EXITS)
    assert code == 0 and "saved" in out and "not stopped" not in out, out
    assert (run_dir / "scontrol").read_text() == "scontrol requeue 7\n"


@pytest.mark.parametrize("sbatch, script, why", [
    (("no-requeue",), "allreduce", "--sbatch no-requeue"),
    ((), str(SCRIPT), "its script does not resume from a checkpoint"),
])
def test_on_usr1_a_job_that_does_not_requeue_waits_for_the_save_and_ends(tmp_path, hpc_home, sbatch, script, why):
    code, out, run_dir = _handler(tmp_path, SAVES_AND_EXITS, *sbatch, script=script)
    assert code == 0 and "saved" in out and "not stopped" not in out, out
    assert f"hpclaunch: USR1: stopping job 7; not requeued ({why}" in out
    assert not (run_dir / "scontrol").exists()
    assert why in RunFiles(run_dir).stop_reason.read_text()
    # a launch that ends badly: the job ends with its exit code
    code, out, _ = _handler(tmp_path / "again", "trap 'exit 3' USR1; while :; do sleep 0.1; done", *sbatch,
                            script=script)
    assert code == 3, out
