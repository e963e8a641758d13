"""The bundled recipes' `tiny` presets, trained for real (2 CPU ranks, gloo) through `hpclaunch submit
--follow` on the `local` profile, and on the dev Slurm cluster (2 nodes x 2 ranks) when it is up.

What a user checks: the job completes, its loss falls, its metrics have every field; GPT-2 gives the
same loss per step under torchrun/DDP and DeepSpeed ZeRO-1/2/3; a run stopped after step k and
restarted in the same run directory gives the losses of an uninterrupted run, and so does a ZeRO-3 run that
crashed after a checkpoint written in the background.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.waiting import LONG_S

REPO = Path(__file__).resolve().parents[2]
FIELDS = {"step", "loss", "lr", "grad_norm", "tokens_per_s", "samples_per_s", "peak_mem_bytes", "mfu"}
# Short runs: a loss logged every step, no intermediate checkpoint.
QUICK = ("--set", "train.log_every=1", "--set", "train.save_every=0", "--set", "train.eval_steps=2")


def submit(
    home: Path,
    recipe: str,
    *sets: str,
    profile: str = "local",
    env: dict | None = None,
    extra: tuple[str, ...] = (),
    ok: bool = True,
) -> Path:
    """`hpclaunch submit recipes/R --preset tiny --follow` as a user runs it; returns the run dir (of a job that
    completed, or with ok false one that failed)."""
    cmd = [
        sys.executable,
        "-m",
        "hpclaunch.cli.main",
        "submit",
        str(REPO / "recipes" / recipe),
        "--profile",
        profile,
        "--preset",
        "tiny",
        *extra,
        *sets,
        "--follow",
    ]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=LONG_S,  # --follow: the job's time queued for nodes is in it
        env={**os.environ, "HPCLAUNCH_HOME": str(home), **(env or {})},
    )
    run_dir = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert run_dir, proc.stdout
    return Path(run_dir.group(1))


def records(run_dir: Path, kind: str = "train", rank: int = 0) -> list[dict]:
    path = run_dir / "metrics" / f"rank-{rank}.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == kind]


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run_dir)}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hpclaunch-home")


@pytest.fixture(scope="module")
def gpt2_ddp(home) -> Path:
    """GPT-2 tiny, torchrun + DDP, 8 steps: the reference of the parity and resume tests."""
    return submit(home, "gpt2", "--set", "train.max_steps=8", *QUICK)


def job_of(home: Path, run_dir: Path) -> str:
    found = [r["job_id"] for r in map(json.loads, (p.read_text() for p in (home / "registry").glob("*.json")))
             if r["run_dir"] == str(run_dir)]
    assert len(found) == 1, found
    return found[0]


def check_export(home: Path, run_dir: Path) -> None:
    """`hpclaunch export` gives a folder that transformers loads whole (no missing or unexpected weights)."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "export", job_of(home, run_dir), "--json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HPCLAUNCH_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = json.loads(proc.stdout.splitlines()[-1])
    (model_rec,) = records(run_dir, "model")
    assert done["params"] == model_rec["params"]
    auto = AutoModelForMaskedLM if "bert" in run_dir.name else AutoModelForCausalLM
    model, info = auto.from_pretrained(done["folder"], output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert sum(p.numel() for p in model.parameters()) == model_rec["params"]
    ids = AutoTokenizer.from_pretrained(done["folder"])("To be, or not to be", return_tensors="pt").input_ids
    assert model(input_ids=ids, labels=ids).loss.isfinite()


def check_trained(run_dir: Path, world: int = 2) -> None:
    for rank in range(world):
        train = records(run_dir, rank=rank)
        assert train, f"rank {rank} wrote no metrics"
        for r in train:
            assert FIELDS <= r.keys(), FIELDS - r.keys()
            assert r["mfu"] is None  # CPU: no peak FLOPs known
            assert r["tokens_per_s"] > 0 and r["peak_mem_bytes"] > 0 and r["world_size"] == world
    train = records(run_dir)
    assert train[-1]["loss"] < train[0]["loss"] - 0.05, [r["loss"] for r in train]
    (ev,) = records(run_dir, "eval")
    assert ev["perplexity"] == pytest.approx(2.718281828 ** ev["eval_loss"], rel=1e-6)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [f"step-{train[-1]['step']:08d}"]


def test_gpt2_tiny_trains_under_ddp(home, gpt2_ddp):
    check_trained(gpt2_ddp)
    log = (gpt2_ddp / "logs" / "rank-0.restart-0.log").read_text()
    assert "2 rank(s) on cpu/gloo" in log and "DDP" in log
    check_export(home, gpt2_ddp)  # a DDP checkpoint, GPT-2's tied embeddings stored once


def test_a_torchrun_rank_imports_no_deepspeed(gpt2_ddp):
    """DDP needs no DeepSpeed: no rank imports it (its start-up record says so) and no rank log shows its
    accelerator warning ("Setting accelerator to CPU" from real_accelerator.py), which a DeepSpeed import prints.
    GPT-2 trains on hpclaunch's torch-only model: rank 1, which never builds the store's generated assets (rank 0
    does, once per store), imports no transformers either, and no rank imports torch's compiler (with sympy: its
    optimizer is hpclaunch's FusedAdamW)."""
    assert "model code: GPT-2 (hpclaunch.runtime.train.gpt2" in (gpt2_ddp / "logs" / "rank-0.restart-0.log").read_text()
    for rank in (0, 1):
        (start,) = records(gpt2_ddp, "startup", rank=rank)
        assert "torch" in start["packages"], start
        assert "deepspeed" not in start["packages"], start
        assert rank == 0 or "transformers" not in start["packages"], start
        assert "sympy" not in start["packages"], start  # torch's compiler, which torch's own AdamW would import
        assert start["cpu_s"] == pytest.approx(start["user_s"] + start["sys_s"], abs=0.002) and start["cpu_s"] > 0
        log = (gpt2_ddp / "logs" / f"rank-{rank}.restart-0.log").read_text()
        assert "real_accelerator" not in log and "ds_accelerator" not in log, log[:2000]


def test_a_torchrun_rank_that_builds_the_generated_model_imports_no_deepspeed(tmp_path, gpt2_ddp):
    """A fresh asset store (the profile's `~/.hpclaunch/assets` under another HOME): rank 0 builds the tiny model's
    weights (transformers' save_pretrained imports DeepSpeed when it is installed: that runs in a child), and still
    no rank imports DeepSpeed or shows its warning."""
    run_dir = submit(tmp_path / "home", "gpt2", "--set", "train.max_steps=2", *QUICK, env={"HOME": str(tmp_path)})
    assert len(list((tmp_path / ".hpclaunch" / "assets" / "generated" / "models").iterdir())) == 1  # built here
    for rank in (0, 1):
        (start,) = records(run_dir, "startup", rank=rank)
        assert "deepspeed" not in start["packages"], start
        log = (run_dir / "logs" / f"rank-{rank}.restart-0.log").read_text()
        assert "real_accelerator" not in log, log[:2000]
    # the weights built here are those of the shared store's model: the same losses as the reference run's
    cold, warm = losses(run_dir), losses(gpt2_ddp)
    assert sorted(cold) == [1, 2] and all(cold[step] == warm[step] for step in cold), (cold, warm)


def test_gpt2_on_transformers_model_and_ddp_gives_the_same_losses(home, gpt2_ddp):
    """The old path, asked for by name (transformers' GPT2LMHeadModel, torch's DDP), trains to the very same losses
    as hpclaunch's torch-only GPT-2 with its hook-based all-reduce: the same weights and the same arithmetic."""
    run_dir = submit(home, "gpt2", "--set", "train.max_steps=8", *QUICK, "--set", "train.model_code=transformers",
                     "--set", "train.grad_sync=ddp")
    assert "model code:" not in (run_dir / "logs" / "rank-0.restart-0.log").read_text()
    for rank in (0, 1):
        (start,) = records(run_dir, "startup", rank=rank)
        assert "transformers" in start["packages"], start
    assert losses(run_dir) == losses(gpt2_ddp)


# 10 steps, logged every 2, no intermediate checkpoint: enough to see the loss fall
SHORT_RUN = ("--set", "train.max_steps=10", "--set", "train.log_every=2", "--set", "train.save_every=0",
             "--set", "train.eval_steps=2")


@pytest.mark.parametrize("recipe", ["bert_large", "mixtral"])
def test_deepspeed_tiny_recipe_trains(home, recipe):
    run_dir = submit(
        home,
        recipe,
        *SHORT_RUN,
    )
    check_trained(run_dir)
    assert "DeepSpeed ZeRO-3" in (run_dir / "logs" / "rank-0.restart-0.log").read_text()
    # ZeRO-3 partitions while loading: right after the load each of the 2 ranks holds half the parameters
    for rank in (0, 1):
        (model,) = records(run_dir, "model", rank=rank)
        assert model["world_size"] == 2 and model["params"] > 0
        assert model["held_param_bytes"] == pytest.approx(model["param_bytes"] / 2, rel=0.01), model
    check_export(home, run_dir)  # the ZeRO-3 shards consolidated into one Hugging Face folder


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_gpt2_parity_ddp_vs_deepspeed_zero(home, gpt2_ddp, stage):
    zero = ("--set", "launcher=deepspeed", "--set", f"deepspeed.zero_stage={stage}")
    if stage < 3:
        run_dir = submit(home, "gpt2", "--set", "train.max_steps=8", *QUICK, *zero)
    else:  # ZeRO-3 (the bundled DeepSpeed recipes'): resumed from a checkpoint written while training went on
        run_dir = _zero3_crashed_and_resumed(home, zero)
    assert f"DeepSpeed ZeRO-{stage}" in (run_dir / "logs" / "rank-0.restart-0.log").read_text()
    start = records(run_dir, "startup")[0]  # (ZeRO-3: each of its two runs wrote one)
    assert "deepspeed" in start["packages"], start  # the DeepSpeed launcher's ranks do import it
    ddp, ds = losses(gpt2_ddp), losses(run_dir)
    assert ddp.keys() == ds.keys() == set(range(1, 9))
    for step in ddp:
        assert abs(ddp[step] - ds[step]) < 1e-4, (step, ddp[step], ds[step])


def restart(home: Path, run_dir: Path, without: str) -> None:
    """The restart: the same job script in the same run directory, restart count 1 (the neutral variable the
    scheduler parts set: Slurm's job.sh maps SLURM_RESTART_COUNT to it; a rerun by hand sets it), without the
    variable that stopped the first run."""
    env = {k: v for k, v in os.environ.items() if k != without}
    env.update(HPCLAUNCH_JOB_ID="requeued", HPCLAUNCH_RESTART="1", HPCLAUNCH_HOME=str(home))
    proc = subprocess.run(["bash", str(run_dir / "job.sbatch")], cwd=run_dir, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _zero3_crashed_and_resumed(home: Path, zero: tuple[str, ...]) -> Path:
    """ZeRO-3 saves at step 4 (in the background: every rank's partition copied, then written while steps 5 and 6
    train), rank 0 crashes after step 6; the job script run again (restart 1) resumes at step 4, and its steps 5
    and 6 give the first run's losses exactly."""
    run_dir = submit(home, "gpt2", "--set", "train.max_steps=8", *QUICK, *zero, "--set", "train.save_every=4",
                     env={"HPCLAUNCH_INJECT": "crash:0:6"}, ok=False)
    (saved,) = map(json.loads, (run_dir / "checkpoints.jsonl").read_text().splitlines())
    assert saved["step"] == 4 and saved["async"] is True, saved  # written in the background, then recorded
    restart(home, run_dir, "HPCLAUNCH_INJECT")
    assert "at step 4" in (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    runs = [r for r in records(run_dir) if r["step"] in (5, 6)]  # the first run's, then the resumed run's
    assert [r["step"] for r in runs] == [5, 6, 5, 6], runs
    assert runs[0]["loss"] == pytest.approx(runs[2]["loss"], abs=1e-6)
    assert runs[1]["loss"] == pytest.approx(runs[3]["loss"], abs=1e-6)
    return run_dir


def test_gpt2_stopped_and_restarted_gives_the_uninterrupted_losses(home, gpt2_ddp):
    # HPCLAUNCH_STOP_AT_STEP makes the loop act as on SIGUSR1/SIGTERM: save at step 4 and exit 0.
    run_dir = submit(home, "gpt2", "--set", "train.max_steps=8", *QUICK, env={"HPCLAUNCH_STOP_AT_STEP": "4"})
    assert sorted(losses(run_dir)) == [1, 2, 3, 4]
    assert (run_dir / "checkpoints" / "step-00000004").is_dir()
    restart(home, run_dir, "HPCLAUNCH_STOP_AT_STEP")
    assert "resumed from" in (run_dir / "logs" / "rank-0.restart-1.log").read_text()
    resumed, reference = losses(run_dir), losses(gpt2_ddp)
    assert sorted(resumed) == list(range(1, 9))
    for step in reference:
        assert abs(resumed[step] - reference[step]) < 1e-6, (step, resumed[step], reference[step])


@pytest.mark.slurm
@pytest.mark.parametrize("recipe", ["gpt2", "bert_large", "mixtral"])
def test_tiny_recipe_on_dev_slurm_2_nodes(home, recipe):
    run_dir = submit(
        home,
        recipe,
        *SHORT_RUN,
        profile="dev-slurm",
        extra=("--nodes", "2", "--gpus-per-node", "2"),
    )
    check_trained(run_dir, world=4)


def test_sigterm_saves_a_checkpoint_and_stops(home):
    """What Slurm does before a time limit or preemption: the ranks get SIGTERM (here from `hpclaunch
    cancel`, which signals the local job's process group), save at the next log step and stop."""
    cmd = [
        sys.executable,
        "-m",
        "hpclaunch.cli.main",
        "submit",
        str(REPO / "recipes" / "gpt2"),
        "--profile",
        "local",
        "--preset",
        "tiny",
        "--set",
        "train.max_steps=5000",
        "--set",
        "train.log_every=5",
        "--set",
        "train.save_every=0",
        "--set",
        "launch.agent=torchrun",  # torchrun's agent stops quietly too (the default's cancel: test_agentless.py)
    ]
    env = {**os.environ, "HPCLAUNCH_HOME": str(home)}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    run_dir = Path(re.search(r"run directory: (\S+)", out).group(1))
    job_id = re.search(r"submitted job (\S+)", out).group(1)
    metrics = run_dir / "metrics" / "rank-0.jsonl"
    deadline = time.time() + 180
    # a train record: the loop runs, and its SIGTERM handler is set (the model's size is written before it is)
    while not (metrics.is_file() and '"kind": "train"' in metrics.read_text()) and time.time() < deadline:
        time.sleep(0.5)
    subprocess.run(
        [sys.executable, "-m", "hpclaunch.cli.main", "cancel", job_id], env=env, check=True, timeout=60
    )
    # cancel signals the job and returns; on a busy machine the ranks may still be saving: wait for the end
    status = [sys.executable, "-m", "hpclaunch.cli.main", "status", job_id, "--json"]
    deadline = time.time() + 180
    while time.time() < deadline:
        state = json.loads(subprocess.run(status, env=env, capture_output=True, text=True, check=True).stdout)
        if state["state"] not in ("RUNNING", "PENDING", "SUBMITTING", "COMPLETING"):
            break
        time.sleep(0.5)
    log = (run_dir / "logs" / "rank-0.restart-0.log").read_text()
    assert "got signal SIGTERM" in log and "stopped at step" in log
    (ckpt,) = (run_dir / "checkpoints").iterdir()
    step = int(ckpt.name.split("-")[1])
    assert step % 5 == 0 and step < 5000 and max(r["step"] for r in records(run_dir)) == step
    # the ranks end quietly: torchrun's agent (hpclaunch/runtime/train/agent.py) says in one line that it was
    # stopped, with no SignalException traceback from the signal's copies (the process group's, the supervisor's)
    (out,) = (run_dir / "logs").glob("job.*.out")
    text = out.read_text() + "".join(p.read_text() for p in (run_dir / "logs").glob("rank-*.log"))
    assert "Traceback" not in text and "SignalException" not in text and "Logging error" not in text, text
    assert text.count("hpclaunch: torchrun got SIGTERM: stopping the ranks on this node") == 1, text
