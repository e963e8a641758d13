"""The start-up timeline (RUN_DIR/timeline.jsonl) and the TensorBoard events, from real local jobs: the job
script's stamps (allreduce fixture, a sweep of it), every phase of GPT-2 tiny through the runtime, what
`status`, `status --json` and `report` make of them; and how the stamps read back (requeues, broken lines)."""

from __future__ import annotations

import json
import math
import re
import socket
import time
from pathlib import Path

import pytest

from hpclaunch.schedulers.base import TERMINAL
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]
SCRIPT_PHASES = ["submitted", "started", "env_ready", "launched", "ranks_started", "finished"]


def _submit_and_follow(hpclaunch, *args: str) -> str:
    result = hpclaunch("submit", *args, "--profile", "local", "--follow")
    assert result.exit_code == 0, result.output
    (job,) = [line.split()[1] for line in result.output.splitlines() if line.startswith("job local-")]
    return job


def _status(hpclaunch, job: str) -> dict:
    result = hpclaunch("status", job, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _in_order(entry: dict) -> list[str]:
    """The stamped phases of one restart, ordered by time; the test compares it with PHASES' order."""
    return sorted(entry["phases"], key=entry["phases"].get)


def test_a_local_job_stamps_the_job_script_phases_in_order(hpclaunch):
    job = _submit_and_follow(hpclaunch, "allreduce")
    (entry,) = _status(hpclaunch, job)["timeline"]
    assert entry["restart"] == 0 and entry["job"] == job
    assert _in_order(entry) == SCRIPT_PHASES  # the fixture uses no runtime: no model, data or step stamps
    d = entry["durations"]
    assert set(d) == {"queued", "env", "job_script", "launcher", "training"}
    assert all(v >= 0 for v in d.values())
    assert d["job_script"] < 1.0  # the script's own work before the launch
    text = hpclaunch("status", job).output
    assert f"timeline: queued {timeline.seconds(d['queued'])}, start-up (no first step): env " in text


def test_a_sweep_stamps_submitted_for_every_element(hpclaunch):
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--sweep", "train.lr=1e-4,3e-4",
                       "--max-parallel", "1", "--json")
    assert result.exit_code == 0, result.output
    sweep = json.loads(result.stdout)
    ids = [e["job_id"] for e in sweep["elements"]]
    deadline = time.time() + 120
    while time.time() < deadline:
        states = [_status(hpclaunch, e) for e in ids]
        if all(s["state"] in TERMINAL for s in states):
            break
        time.sleep(0.5)
    for element, s in zip(ids, states, strict=True):
        assert s["state"] == "COMPLETED", s
        (entry,) = s["timeline"]
        assert entry["job"] == element and _in_order(entry) == SCRIPT_PHASES


@pytest.mark.slow
def test_gpt2_tiny_has_every_phase_in_order_and_tensorboard_has_its_losses(hpclaunch, hpc_home):
    """GPT-2 tiny (2 CPU ranks) through the runtime: all phases, the report's bar, and TensorBoard events
    that tensorboard's own reader gives back with the losses of the metrics JSON lines."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    job = _submit_and_follow(hpclaunch, str(REPO / "recipes" / "gpt2"), "--preset", "tiny",
                             "--set", "train.max_steps=4", "--set", "train.log_every=1",
                             "--set", "train.save_every=0", "--set", "train.eval_steps=2",
                             "--set", "health.enabled=true")  # off by default on local; here: every phase
    status = _status(hpclaunch, job)
    (entry,) = status["timeline"]
    # every phase but env_packed, env_staged and env_fallback (python.stage node-local:
    # tests/integration/test_nodelocal_slurm.py) and container_started (no container here)
    absent = ("env_packed", "env_staged", "env_fallback", "container_started")
    assert _in_order(entry) == [p for p in timeline.PHASES if p not in absent]
    assert status["health"]["ok"] and [n["host"] for n in status["health"]["nodes"]] == [socket.gethostname()]
    assert list(entry["durations"]) == [s for p, s in timeline.SPANS.items() if p not in absent]
    assert entry["startup_s"] == pytest.approx(entry["phases"]["first_step"] - entry["phases"]["started"], abs=1e-3)
    text = hpclaunch("status", job).output
    assert "start-up " in text and "model load " in text and "rendezvous " in text

    run = RunFiles(Path(status["run_dir"]))
    records = [json.loads(line) for line in run.metrics_file(0).read_text().splitlines()]
    train = {r["step"]: r for r in records if r["kind"] == "train"}
    (ev,) = [r for r in records if r["kind"] == "eval"]
    acc = EventAccumulator(str(run.tensorboard))
    acc.Reload()
    scalars = acc.Tags()["scalars"]
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "eval/loss", "eval/perplexity"} <= set(
        scalars)
    assert "train/mfu" not in scalars  # CPU: no peak FLOPs, no MFU
    tb_losses = {e.step: e.value for e in acc.Scalars("train/loss")}
    assert sorted(tb_losses) == sorted(train) == [1, 2, 3, 4]
    for step, value in tb_losses.items():
        assert value == pytest.approx(train[step]["loss"], rel=1e-6)  # float32 in the event file
    assert [e.value for e in acc.Scalars("train/lr")] == pytest.approx([train[s]["lr"] for s in sorted(train)])
    (ppl,) = acc.Scalars("eval/perplexity")
    assert ppl.step == ev["step"] and ppl.value == pytest.approx(ev["perplexity"], rel=1e-6)

    result = hpclaunch("report", job, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["timeline"] == status["timeline"]
    png = Path(next(p for p in report["plots"] if p.endswith("timeline.png")))
    from PIL import Image

    drawn = json.loads(Image.open(png).text["Description"])
    assert drawn == {"0": entry["durations"]}

    # the goodput ledger: one allocation from the job script's start to its end, every second of it accounted
    led = report["goodput"]
    assert led == status["goodput"] and led["nodes"] == 1 and led["recomputed_steps"] == 0
    phases = entry["phases"]
    assert led["allocated_s"] == pytest.approx(phases["finished"] - phases["started"], abs=1e-2)
    lost = led["lost_s"]
    assert lost["startup"] + lost["health"] == pytest.approx(phases["data_ready"] - phases["started"], abs=1e-2)
    assert lost["health"] == pytest.approx(entry["durations"]["health"], abs=1e-3)
    assert led["productive_s"] + sum(lost.values()) == pytest.approx(led["allocated_s"], abs=1e-2)
    assert 0 < led["goodput"] == pytest.approx(led["productive_s"] / led["allocated_s"], abs=1e-3)
    text = hpclaunch("report", job).output
    assert f"goodput {100 * led['goodput']:.1f} % of 1 node(s) x " in text

    # the goodput promised at submit (RUN_DIR/promise.json: the plan's checkpoint at storage.write_gbps, the
    # profile's rate and recovery) and the outcome beside it: the ledger's, the first start-up left out
    promised, outcome = report["promise"]["promised"], report["promise"]["outcome"]
    assert promised["inputs"]["nodes"] == 1 and "the plan's" in promised["inputs"]["write"]["source"]
    assert outcome["goodput"] == led["goodput"] and outcome["recoveries"] == 0
    assert outcome["goodput_after_startup"] == pytest.approx(
        led["productive_s"] / (led["allocated_s"] - lost["startup"] - lost["health"]), abs=1e-3)
    assert f"promised at submit: expected goodput {100 * promised['goodput']:.1f} % after start-up" in text
    assert (f"outcome: goodput {100 * outcome['goodput_after_startup']:.1f} % after start-up "
            f"({100 * led['goodput']:.1f} % of the whole allocation), 0 recoveries") in text
    # a later run of the same recipe, preset, profile and layout is promised from what this one measured
    again = hpclaunch("submit", str(REPO / "recipes" / "gpt2"), "--preset", "tiny", "--profile", "local", "--dry-run")
    assert again.exit_code == 0, again.output
    assert f"hpclaunch:     measured, median of 1 save (job {job})" in again.stderr.splitlines()
    assert re.search(rf"a step takes [0-9.]+ s:\n.*    measured, rank 0's last [0-9]+ steps \(job {job}\)",
                     again.stderr)


# --- reading stamps back


def _stamp(run: RunFiles, phase: str, restart: int, t: float, job: str = "7") -> None:
    timeline.append(run.timeline, phase, restart=restart, job=job, t=t)


def test_a_requeued_restart_is_queued_from_the_previous_end_and_broken_lines_are_skipped(tmp_path):
    run = RunFiles(tmp_path)
    for phase, t in (("submitted", 100.0), ("started", 292.0), ("env_ready", 310.0), ("first_step", 333.0),
                     ("finished", 1000.0), ("started", 1060.0), ("first_step", 1075.5)):
        _stamp(run, phase, 0 if t <= 1000 else 1, t)
    with open(run.timeline, "a") as f:
        f.write('{"phase": "model_loaded", "restart": 1, "t": 10\n')  # a job killed mid-write
        f.write('{"phase": "no_such_phase", "restart": 1, "t": 10}\n')
    first, second = timeline.load(run)
    assert first["durations"] == {"queued": 192.0, "env": 18.0, "first_step": 23.0, "training": 667.0}
    assert timeline.describe(first) == "queued 3m12s, start-up 41s (env 18s, first step 23s), training 11m07s"
    assert second["durations"] == {"queued": 60.0, "first_step": 15.5}
    assert second["startup_s"] == 15.5 and second["queued_s"] == 60.0


def test_the_runtime_stamps_from_rank_0_only_and_once(tmp_path, monkeypatch):
    run = RunFiles(tmp_path)
    env = {"HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_RESTART": "2", "HPCLAUNCH_JOB_ID": "9"}
    monkeypatch.setattr(timeline, "_MARKED", set())
    timeline.mark("model_loaded", {**env, "RANK": "1"})
    timeline.mark("model_loaded", {"RANK": "0"})  # outside a job: nothing
    assert not run.timeline.exists()
    timeline.mark("model_loaded", {**env, "RANK": "0"})
    timeline.mark("model_loaded", {**env, "RANK": "0"})
    (rec,) = timeline.read(run)
    assert rec["phase"] == "model_loaded" and rec["restart"] == 2 and rec["job"] == "9"
    assert math.isclose(rec["t"], time.time(), abs_tol=5)


@pytest.mark.parametrize(("s", "words"), [(0.004, "0.004s"), (1.83, "1.8s"), (41.4, "41s"), (192, "3m12s"),
                                          (3725, "1h02m"), (93600, "1d02h")])
def test_durations_in_words(s, words):
    assert timeline.seconds(s) == words
