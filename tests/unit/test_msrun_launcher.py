"""msrun launcher and the gpt_mindspore recipe without a cluster: the parallel config is refused
before queueing with the numbers in the message, the node command, the files written into the run
directory, and the worker wrapper that keeps a failing worker's exit code (msrun keeps only 0/1).

Golden scripts: tests/fixtures/golden/msrun-*.sbatch are re-rendered by tests/unit/test_golden.py::test_other_goldens.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.state.runfiles import MSRUN_NODE_SCRIPT as NODE_SCRIPT
from hpclaunch.state.runfiles import MSRUN_WORKER as WORKER_WRAPPER
from hpclaunch.submission.render import render
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "recipes" / "gpt_mindspore")
GOLDEN = REPO / "tests" / "fixtures" / "golden"


def _submit_error(hpclaunch, *args: str) -> str:
    result = hpclaunch("submit", RECIPE, "--dry-run", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.stderr


@pytest.mark.parametrize("args, expected", [
    (("--profile", "ascend-910", "--preset", "70b", "--layout", "2n8g"),
     "model_parallel(8) x pipeline_stage(4) = 32 devices per model replica, but the layout has 16 devices"),
    (("--profile", "local", "--preset", "tiny", "--set", "parallel.data_parallel=3"),
     "data_parallel(3) x model_parallel(1) x pipeline_stage(1) = 3, but the layout has 2 devices"),
    (("--profile", "ascend-910", "--layout", "1n8g", "--set", "parallel.pipeline_stage=4",
      "--set", "parallel.micro_batch_num=2"),
     "micro_batch_num(2) must be at least pipeline_stage(4)"),
    (("--profile", "ascend-910", "--layout", "1n8g", "--set", "parallel.model_parallel=8",
      "--set", "model.config.num_attention_heads=12"),
     "model_parallel(8) does not divide num_attention_heads(12)"),
    (("--profile", "local", "--preset", "tiny", "--set", "parallel.pipeline_stage=2",
      "--set", "parallel.micro_batch_num=2", "--set", "model.config.num_layers=1"),
     "pipeline_stage(2) is more than num_layers(1)"),
])
def test_parallel_config_is_refused_before_queueing(hpclaunch, hpc_home, args, expected):
    err = _submit_error(hpclaunch, *args)
    assert expected in err
    assert "hint:" in err
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


@pytest.mark.parametrize("item", ["parallel.implemented=[data,model,pipeline]",
                                  "parallel={implemented: [data, model], model_parallel: 2}"])
def test_parallel_implemented_cannot_be_set_on_the_command_line(hpclaunch, hpc_home, item):
    """It says what the script does; setting it would switch the refusal of model/pipeline parallelism off."""
    err = _submit_error(hpclaunch, "--profile", "ascend-910", "--preset", "70b", "--layout", "8n8g", "--set", item)
    assert f"parallel.implemented: --set {item}: parallel.implemented says what the recipe's script implements" in err
    assert "hint: leave it out" in err


@pytest.mark.parametrize("item, expected", [
    ("model.config.position_embedding_type=rope", "model.config.position_embedding_type: 'rope'"),
    ("parallel.vocab_emb_dp=false", "parallel.vocab_emb_dp: false (--set parallel.vocab_emb_dp=false)"),
    ("train.precision=bf16", "train.precision: 'bf16' (--set train.precision=bf16): recipe gpt_mindspore's script "
                             "runs on MindSpore's CPU backend"),
    ("model.config.compute_dtype=bfloat16", "model.config.compute_dtype: 'bfloat16'"),
    ("model.config.params_dtype=float16", "keeps float32 parameters"),
    ("model.config.untie_embeddings_and_output_weights=2", "reads true or false"),
])
def test_a_key_the_script_would_ignore_is_refused(hpclaunch, hpc_home, item, expected):
    err = _submit_error(hpclaunch, "--profile", "local", "--preset", "tiny", "--set", item)
    assert expected in err and "hint: set " in err
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


def test_the_keys_the_script_reads_resolve(hpc_home):
    """grad_accum and global_batch_size (the job's, which the script reads), eval/save intervals, tied embeddings,
    and bf16 where the devices have it."""
    sets = ("train.global_batch_size=32", "train.eval_every=4", "train.save_every=8",
            "model.config.untie_embeddings_and_output_weights=false")
    spec = resolve(RECIPE, "local", CliOverrides(preset="tiny", sets=sets))
    assert (spec.grad_accum, spec.global_batch_size, spec.data_parallel) == (2, 32, 2)
    spec = resolve(RECIPE, "ascend-910", CliOverrides(layout="1n8g", sets=("train.precision=bf16",)))
    assert spec.recipe.train.precision == "bf16"


def test_a_parallelism_the_script_lacks_is_refused_before_queueing(hpclaunch, hpc_home):
    """The 70b preset's layout adds up, but the bundled script trains data parallel only: refused up front
    rather than queueing 8 nodes to stop inside the job."""
    err = _submit_error(hpclaunch, "--profile", "ascend-910", "--preset", "70b", "--layout", "8n8g")
    assert "model_parallel(8) and pipeline_stage(4) asked, but its script implements data parallelism only" in err
    assert "hint:" in err
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())


def _declaring_recipe(tmp_path: Path) -> str:
    """A copy of the recipe whose recipe.yaml says its script implements model and pipeline parallelism (as
    MindFormers' does): parallel.implemented is a fact of the recipe file."""
    folder = tmp_path / "gpt_mindspore"
    shutil.copytree(RECIPE, folder)
    text = (folder / "recipe.yaml").read_text()
    text = text.replace("\nparallel:\n", "\nparallel:\n  implemented: [data, model, pipeline]\n")
    (folder / "recipe.yaml").write_text(text)
    return str(folder)


def test_good_parallel_configs_resolve(hpc_home, tmp_path):
    spec = resolve(_declaring_recipe(tmp_path), "ascend-910", CliOverrides(preset="70b", layout="8n8g"))
    assert (spec.data_parallel, spec.world_size) == (2, 64)
    spec = resolve(RECIPE, "ascend-910", CliOverrides(layout="2n8g"))
    assert spec.preset == "7b" and spec.data_parallel == 16
    assert spec.recipe.model.config["num_layers"] == 32 and spec.recipe.train.adam_betas == (0.9, 0.95)


def _rendered(hpc_home, profile="dev-slurm", preset="tiny", layout="2n2g"):
    run_dir = Path("/runs/msrun")
    spec = with_recipe_copy(resolve(RECIPE, profile, CliOverrides(preset=preset, layout=layout)), run_dir)
    return spec, render(spec, run_dir)


def test_one_msrun_per_node_with_the_neutral_node_rank(hpc_home):
    spec, rendered = _rendered(hpc_home)
    script = rendered.script
    assert spec.recipe.python_env == "mindspore"
    assert "source /opt/hpclaunch-venvs/mindspore/bin/activate" in script
    assert 'srun --kill-on-bad-exit=1 --nodes=2 --nodelist="$HPCLAUNCH_NODELIST" --ntasks=2 --ntasks-per-node=1' \
        in script
    for word in ("msrun --worker_num=4 --local_worker_num=2", '"--master_addr=${MASTER_IP}"',
                 '"--master_port=${MASTER_PORT}"', '"--node_rank=${HPCLAUNCH_NODE_RANK:-0}"',
                 '"--log_dir=${HPCLAUNCH_LOG_DIR}/msrun/node${HPCLAUNCH_NODE_RANK:-0}.restart-${HPCLAUNCH_RESTART:-0}"',
                 "--join=True", "--cluster_time_out=300",
                 f"/runs/msrun/{NODE_SCRIPT} msrun",
                 f"/runs/msrun/{WORKER_WRAPPER} /runs/msrun/recipe/train.py",
                 "--config /runs/msrun/resolved.yaml"):
        assert word in script, word
    assert set(rendered.files) >= {NODE_SCRIPT, WORKER_WRAPPER, "job.sbatch", "resolved.yaml"}
    assert "SLURM_" not in rendered.files[NODE_SCRIPT] and "SLURM_" not in rendered.files[WORKER_WRAPPER]


def test_ascend_makes_npus_visible_and_uses_recipe_timeout(hpc_home):
    _, rendered = _rendered(hpc_home, "ascend-910", "7b", "2n8g")
    assert 'export ASCEND_RT_VISIBLE_DEVICES="${HPCLAUNCH_DEVICES:-${CUDA_VISIBLE_DEVICES:-0,1,2,3,4,5,6,7}}"' in (
        rendered.script
    )
    assert "msrun --worker_num=16 --local_worker_num=8" in rendered.script
    assert "--cluster_time_out=7200" in rendered.script
    assert "conda activate mindspore" in rendered.script


def test_node_script_is_valid_bash_and_cleans_up_by_tag(hpc_home):
    _, rendered = _rendered(hpc_home)
    node = rendered.files[NODE_SCRIPT]
    proc = subprocess.run(["bash", "-n"], input=node, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "trap 'cleanup; kill \"$TAIL_PID\" 2>/dev/null; code=$(peer_failure); exit \"${code:-143}\"' TERM" in node
    assert 'kill -INT "$MSRUN_PID"' in node
    assert "HPCLAUNCH_MSRUN_TAG" in node


def test_msrun_goldens_exist_for_ascend():
    for name in ("msrun-ascend-910-1n8g", "msrun-ascend-910-2n8g"):
        text = (GOLDEN / f"{name}.sbatch").read_text()
        assert "launcher msrun" in text.splitlines()[1]


def _wrapper(tmp_path: Path, hpc_home) -> Path:
    _, rendered = _rendered(hpc_home)
    path = tmp_path / WORKER_WRAPPER
    path.write_text(rendered.files[WORKER_WRAPPER])
    return path


@pytest.mark.parametrize("body, code", [("import sys; sys.exit(7)", 7), ("raise ValueError('boom')", 1),
                                        ("print('ok')", 0)])
def test_worker_wrapper_records_a_failing_workers_code(tmp_path, hpc_home, body, code):
    wrapper = _wrapper(tmp_path, hpc_home)
    script = tmp_path / "script.py"
    script.write_text(f"import sys\nassert sys.argv[1:] == ['--x', '1']\n{body}\n")
    env = {**os.environ, "MS_ROLE": "MS_WORKER", "RANK_ID": "3", "HPCLAUNCH_MSRUN_STATUS_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(wrapper), str(script), "--x", "1"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == code, proc.stderr
    status = tmp_path / "worker_3.exit"
    if code:
        assert status.read_text().split() == ["3", str(code)]
        assert f"WorkerExitError: msrun worker rank 3 exited with code {code}" in proc.stderr
    else:
        assert not status.exists()


def test_worker_wrapper_ignores_the_scheduler(tmp_path, hpc_home):
    wrapper = _wrapper(tmp_path, hpc_home)
    script = tmp_path / "script.py"
    script.write_text("import sys; sys.exit(5)\n")
    env = {**os.environ, "MS_ROLE": "MS_SCHED", "RANK_ID": "0", "HPCLAUNCH_MSRUN_STATUS_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(wrapper), str(script)], env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 5
    assert not list(tmp_path.glob("*.exit"))


# --- the node supervisor (msrun-node.sh), run by bash with a stand-in for msrun: a small script that
# behaves as msrun does towards its supervisor (starts "workers", returns only 0 or 1). The real msrun
# runs under it in tests/integration/test_msrun_slurm.py.

_FAKE_MSRUN = """#!/bin/bash
# stand-in msrun: $1 = what to do
case "$1" in
  ok) echo "worker output"; exit 0 ;;
  fail) echo "7 7" > "$HPCLAUNCH_MSRUN_STATUS_DIR/worker_7.exit"
        echo "[WARNING] DISTRIBUTED(16406,7fdd015c8b80,python):2026-11-23 [tcp_comm.cc:485] noise" \
          > "$HPCLAUNCH_MSRUN_STATUS_DIR/worker_7.log"
        echo "ValueError: bad batch" >> "$HPCLAUNCH_MSRUN_STATUS_DIR/worker_7.log"; exit 1 ;;
  killed) echo "worker 0 exit with exception. Error code: -9"; exit 1 ;;
  hang) sleep 300 & sleep 300 ; exit 0 ;;
  stop) echo started; until [ -e "$HPCLAUNCH_MSRUN_STATUS_DIR/stop.requested" ]; do sleep 0.1; done
        echo "saved and stopped"; exit 0 ;;
esac
"""


def _start_node(tmp_path: Path, hpc_home, mode: str, job: str, msrun: str | None = None) -> subprocess.Popen:
    """msrun-node.sh as node 1 of restart 2 of job `job`, running `msrun` (default: the stand-in) in `mode`."""
    _, rendered = _rendered(hpc_home)
    node = tmp_path / NODE_SCRIPT
    node.write_text(rendered.files[NODE_SCRIPT])
    fake = tmp_path / "msrun"
    fake.write_text(_FAKE_MSRUN)
    fake.chmod(0o755)
    env = {**os.environ, "HPCLAUNCH_LOG_DIR": str(tmp_path / "logs"), "HPCLAUNCH_RESTART": "2",
           "HPCLAUNCH_NODE_RANK": "1", "HPCLAUNCH_JOB_ID": job}
    return subprocess.Popen(["bash", str(node), msrun or str(fake), mode], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _node_run(tmp_path: Path, hpc_home, mode: str, *, signal_after: float | None = None, msrun: str | None = None):
    """`msrun`: the program the supervisor starts (default: the stand-in)."""
    proc = _start_node(tmp_path, hpc_home, mode, f"t{os.getpid()}", msrun)
    if signal_after is not None:
        time.sleep(signal_after)
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err, tmp_path / "logs" / "msrun" / "node1.restart-2"


def test_node_supervisor_passes_success_and_keeps_msruns_output(tmp_path, hpc_home):
    code, _, _, log = _node_run(tmp_path, hpc_home, "ok")
    assert code == 0
    assert (log / "msrun.out").read_text() == "worker output\n"


def test_node_supervisor_exits_with_the_failed_workers_own_code(tmp_path, hpc_home):
    code, out, err, log = _node_run(tmp_path, hpc_home, "fail")
    assert code == 7
    # the job's output shows the worker's own lines with its rank, without MindSpore's log noise
    assert out == "[rank7]: ValueError: bad batch\n"
    assert "noise" in (log / "worker_7.log").read_text()
    assert f"msrun worker rank 7 on node 1 failed with exit code 7; log: {log}/worker_7.log" in err
    assert "hpclaunch:   ValueError: bad batch" in err and "noise" not in err


def test_node_supervisor_reports_a_worker_killed_by_a_signal(tmp_path, hpc_home):
    code, _, err, log = _node_run(tmp_path, hpc_home, "killed")
    assert code == 137
    assert f"an msrun worker on node 1 was killed by signal 9; logs: {log}" in err


def test_node_supervisor_stops_every_tagged_process_on_sigterm(tmp_path, hpc_home):
    code, _, _, _ = _node_run(tmp_path, hpc_home, "hang", signal_after=1.0)
    assert code == 143
    tag = f"HPCLAUNCH_MSRUN_TAG=t{os.getpid()}.1."
    left = []
    for env_file in Path("/proc").glob("[0-9]*/environ"):
        try:
            if tag.encode() in env_file.read_bytes():
                left.append(env_file.parent.name)
        except OSError:
            continue
    assert not left, f"processes of the stopped node still running: {left}"


def test_node_supervisor_names_an_msrun_that_is_not_there_and_diagnose_says_so(tmp_path, hpc_home):
    """msrun missing from the job's environment (a torch environment): exit 127 with a line naming it, which
    `logs --diagnose` reads as the program the job could not find."""
    from hpclaunch.logs.diagnose import diagnose
    from hpclaunch.schedulers.base import JobStatus

    code, _, err, _ = _node_run(tmp_path, hpc_home, "ok", msrun="msrun-not-installed")
    assert code == 127
    assert "hpclaunch: node 1: msrun-not-installed: command not found (setsid: failed to execute" in err
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "job.7.out").write_text(f"hpclaunch: job 7 restart 0 on n1\n{err}"
                                            "hpclaunch: launch exited with code 127\n")
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="127:0"))
    assert (d.cause, d.title) == ("command_not_found", "the job could not find msrun-not-installed"), d


def _msrun_recipe(tmp_path: Path) -> str:
    """A recipe of its own under msrun that declares no launchers (so nothing but the environment refuses it)."""
    folder = tmp_path / "own_msrun"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "recipe.yaml").write_text("script: train.py\nlauncher: msrun\ntask: test\n")
    return str(folder)


def test_msrun_missing_from_the_jobs_environment_is_refused_before_queueing(hpclaunch, hpc_home, tmp_path,
                                                                               monkeypatch):
    """The local scheduler's job runs with this PATH (capability same_environment): msrun not on it (a torch
    environment) is refused at submit, nothing written; a dry run warns; the MindSpore venv, which has it, passes."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    recipe = _msrun_recipe(tmp_path)
    result = hpclaunch("submit", recipe, "--profile", "local")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ("hpclaunch: error: profile local python: launcher msrun runs msrun, which the job's environment does not "
            "have (not in the PATH the job inherits from here)") in result.stderr
    assert "hint: install MindSpore (docs/mindspore.md) into that environment" in result.stderr
    assert not (hpc_home / "runs").exists() or not list((hpc_home / "runs").iterdir())
    result = hpclaunch("submit", recipe, "--profile", "local", "--dry-run")
    assert result.exit_code == 0 and "warning: profile local python: launcher msrun runs msrun" in result.stderr
    if Path("/opt/hpclaunch-venvs/mindspore/bin/msrun").exists():  # scripts/install-mindspore.sh
        result = hpclaunch("submit", RECIPE, "--profile", "local", "--preset", "tiny", "--dry-run")
        assert result.exit_code == 0 and "warning" not in result.stderr, result.stderr


def _catches_usr1(pid: int) -> bool:
    """Whether process `pid` has a handler for USR1 (bash: its trap is set)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR1 - 1)))
    return False


def test_node_supervisor_tells_the_workers_of_usr1_and_msrun_survives_it(tmp_path, hpc_home):
    """Slurm signals every process of the step: msrun-node.sh leaves stop.requested for the workers, and msrun (here
    the stand-in, which waits for that file as a worker does before it saves and exits 0) started with USR1 ignored
    lives on to return 0, so the node ends 0 and the job script requeues the job."""
    job = f"u{os.getpid()}"
    log = tmp_path / "logs" / "msrun" / "node1.restart-2"
    proc = _start_node(tmp_path, hpc_home, "stop", job)
    deadline = time.monotonic() + 30
    while not ((log / "msrun.out").is_file() and "started" in (log / "msrun.out").read_text()
               and _catches_usr1(proc.pid)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    tag = f"HPCLAUNCH_MSRUN_TAG={job}.1.".encode()
    step = {proc.pid, *_children(proc.pid)} | {int(e.parent.name) for e in Path("/proc").glob("[0-9]*/environ")
                                                if _has(e, tag)}
    for pid in step:  # as Slurm signals a step: every process of it (msrun runs in a session of its own)
        with contextlib.suppress(ProcessLookupError):  # a short-lived one (the stand-in's sleep) already ended
            os.kill(pid, signal.SIGUSR1)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (out, err, (log / "msrun.out").read_text())
    assert (log / "stop.requested").is_file()
    assert (log / "msrun.out").read_text() == "started\nsaved and stopped\n"


def _has(environ: Path, tag: bytes) -> bool:
    try:
        return tag in environ.read_bytes()
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _recipe_script():
    """recipes/gpt_mindspore/train.py as a module (MindSpore is imported only inside its functions)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpt_mindspore_train", Path(RECIPE) / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_worker_stops_when_told_or_when_the_jobs_end_is_near(tmp_path, monkeypatch):
    """The worker's side: stop.requested in its node's folder means signal; the job's end nearer than one more
    window and a save (HPCLAUNCH_END_TIME, rank 0 decides) means end; else it goes on."""
    from hpclaunch.state.runfiles import RunFiles

    script = _recipe_script()
    monkeypatch.setenv("HPCLAUNCH_MSRUN_STATUS_DIR", str(tmp_path))
    monkeypatch.setenv("HPCLAUNCH_END_TIME", str(time.time() + 3600))
    cfg = {"checkpoint": {"write_gbps": 1.0, "plan_bytes": None}}
    assert script.StopCheck(cfg, RunFiles(tmp_path), rank=0, world=1).why() is None
    (tmp_path / "stop.requested").touch()
    assert script.StopCheck(cfg, RunFiles(tmp_path), rank=0, world=1).why() == "signal"
    monkeypatch.setenv("HPCLAUNCH_END_TIME", str(time.time() + 10))
    assert script.StopCheck(cfg, RunFiles(tmp_path), rank=0, world=1).why() == "end"
    assert script.StopCheck(cfg, RunFiles(tmp_path), rank=1, world=1).why() == "signal"  # rank 0 decides the end
