"""The node supervisor's hang watchdog, progress records, fault injection and the blame for a retry, run
as real processes on this machine (the dev-cluster tests in tests/integration/test_resilience.py run them
inside real Slurm jobs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from hpclaunch.runtime.node import blame, inject, progress
from hpclaunch.runtime.node.supervise import HUNG_EXIT_CODE, Watch, verdict
from hpclaunch.state import suspects
from hpclaunch.state.runfiles import RunFiles


def _rec(step: int, phase: str, t: float, host: str = "nodeA") -> dict[str, object]:
    return {"step": step, "phase": phase, "t": t, "host": host}


def test_verdict_names_the_rank_that_stopped_outside_a_collective():
    records = {0: _rec(5, "forward", 100.0), 1: _rec(5, "data", 99.0), 2: _rec(5, "optimizer", 100.5)}
    v = verdict(records)
    assert v["hung"] == [1] and v["waited"] == [0, 2]
    assert v["summary"] == "rank 1 hung after step 5 (phase: data); ranks 0, 2 waited in a collective " \
                           "(phase: forward, optimizer)"


def test_verdict_falls_back_to_the_rank_that_changed_least_recently():
    records = {0: _rec(7, "forward", 100.0), 1: _rec(7, "forward", 90.0)}
    assert verdict(records)["hung"] == [1]


def test_watch_uses_the_init_timeout_until_a_step_is_done_then_the_timeout():
    w = Watch(timeout=60, init_timeout=600, started=0.0)
    assert not w.hung({0: _rec(0, "init", 10.0)}, now=500.0)
    assert w.hung({0: _rec(0, "init", 10.0)}, now=611.0)
    w = Watch(timeout=60, init_timeout=600, started=0.0)
    assert not w.hung({0: _rec(3, "forward", 100.0)}, now=150.0)
    assert w.hung({0: _rec(3, "forward", 100.0)}, now=161.0)


def test_watch_adaptive_tightens_to_five_step_times_but_not_below_the_floor_nor_in_checkpoints():
    w = Watch(timeout=1800, init_timeout=3600, adaptive=True, min_timeout=30, started=0.0)
    for step in range(1, 12):
        w.observe({0: _rec(step, "forward", 100.0 + 10 * step)})  # 10 s per step
    live = {0: _rec(11, "forward", 210.0)}
    assert w.limit(live) == 50.0
    assert w.limit({0: _rec(11, "checkpoint", 210.0)}) == 1800
    fixed = Watch(timeout=1800, init_timeout=3600, adaptive=False, started=0.0)
    for step in range(1, 12):
        fixed.observe({0: _rec(step, "forward", 100.0 + 10 * step)})
    assert fixed.limit(live) == 1800


def test_a_job_whose_ranks_never_report_is_not_judged():
    w = Watch(timeout=10, init_timeout=10, started=0.0)
    assert not w.hung({}, now=10_000.0)


def test_all_ranks_done_is_not_a_hang():
    w = Watch(timeout=10, init_timeout=10, started=0.0)
    assert not w.hung({0: _rec(9, "done", 1.0), 1: _rec(9, "done", 1.0)}, now=1000.0)


def test_progress_records_are_written_off_the_hot_path_and_read_back(tmp_path: Path):
    run = RunFiles(tmp_path)
    p = progress.Progress(run.progress_file(2, 1), rank=2, interval=0.05)
    p.enter("data", 4)
    p.enter("forward")
    time.sleep(0.3)  # the writer thread, not enter(), wrote it
    rec = progress.read_all(run, 1)[2]
    assert (rec["step"], rec["phase"], rec["host"]) == (4, "forward", os.uname().nodename)
    assert progress.read_all(run, 0) == {}


_HANGING_RANK = textwrap.dedent("""
    import os, sys, time
    from hpclaunch.runtime.node import progress
    p = progress.current()
    for step in range(1, 4):
        progress.enter("data", step - 1)
        progress.enter("forward")
        time.sleep(0.05)
        progress.enter("optimizer", step)
    progress.enter("data", 3)
    p.flush()
    if os.environ["RANK"] == "1":
        time.sleep(3600)  # hangs in the data phase
    progress.enter("forward")  # the other rank waits for it in a collective
    p.flush()
    time.sleep(3600)
""")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_RESTART": "0", "HPCLAUNCH_NODE_RANK": "0",
            "HPCLAUNCH_JOB_ID": f"unit{os.getpid()}", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            **extra}


def test_supervisor_ends_a_hung_job_with_the_verdict_and_leaves_no_process(tmp_path: Path):
    script = tmp_path / "ranks.sh"
    rank = f"{sys.executable} -c '{_HANGING_RANK}'"
    script.write_text(f"RANK=0 {rank} &\nRANK=1 {rank} &\nwait\n")
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--timeout=2", "--init-timeout=30",
                           "--poll=0.5", "--grace=2", "--", "bash", str(script)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == HUNG_EXIT_CODE, proc.stderr
    assert time.time() - t0 < 30
    assert "rank 1 hung after step 3 (phase: data); rank 0 waited in a collective (phase: forward)" in proc.stderr
    found = json.loads(RunFiles(tmp_path).watchdog_verdict(0).read_text())
    assert found["hung"] == [1] and found["waited"] == [0] and found["ranks"]["1"]["host"]
    left = subprocess.run(["pgrep", "-f", f"HPCLAUNCH_JOB_ID=unit{os.getpid()}"], capture_output=True)
    assert left.returncode == 1 or not left.stdout.strip()
    tag = f"HPCLAUNCH_SUPERVISOR_TAG=unit{os.getpid()}.".encode()
    alive = [p for p in Path("/proc").glob("[0-9]*/environ") if _holds(p, tag)]
    assert not alive, f"processes left behind: {alive}"


def _holds(env_file: Path, needle: bytes) -> bool:
    try:
        return needle in env_file.read_bytes()
    except OSError:
        return False


def test_supervisor_passes_the_exit_code_and_stops_children_on_sigterm(tmp_path: Path):
    ok = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--no-watchdog", "--", "sh", "-c",
                         "exit 7"], env=_env(tmp_path), capture_output=True, timeout=30)
    assert ok.returncode == 7
    proc = subprocess.Popen([sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--grace=1", "--poll=0.2", "--",
                             "sh", "-c", "trap '' TERM; sleep 300 & wait"], env=_env(tmp_path))
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) in (137, 143, 128 + 9, 128 + 15)


@pytest.mark.parametrize("text", ["hang", "hang:1", "boom:1:2", "hang:-1:2", "hang:1:x"])
def test_injection_refuses_what_is_not_kind_rank_step(text):
    with pytest.raises(ValueError, match="KIND:RANK:STEP"):
        inject.Fault.parse(text)


def test_injection_fires_on_its_rank_after_its_step_once_across_restarts(monkeypatch, tmp_path):
    monkeypatch.setenv("HPCLAUNCH_INJECT", "crash:1:3")
    monkeypatch.setenv("HPCLAUNCH_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("HPCLAUNCH_RESTART", "0")
    other = inject.Injector.from_env(rank=0)
    mine = inject.Injector.from_env(rank=1)
    other.after_step(3, 0.0)
    mine.after_step(2, 0.0)
    with pytest.raises(inject.InjectedCrashError, match="rank 1 after step 3"):
        mine.after_step(3, 0.0)
    monkeypatch.setenv("HPCLAUNCH_RESTART", "1")
    inject.Injector.from_env(rank=1).after_step(3, 0.0)  # it fired: the relaunch runs clean
    assert [json.loads(line)["fault"] for line in RunFiles(tmp_path).injected.read_text().splitlines()] == ["crash:1:3"]


def test_injected_straggler_is_five_times_slower(monkeypatch):
    slept: list[float] = []
    # the injector's own clock only: patching time.sleep itself would also catch every other thread of this
    # process that sleeps (a progress writer an earlier test started, looping every 0.05 s)
    monkeypatch.setattr(inject, "time", types.SimpleNamespace(sleep=slept.append, time=time.time))
    s = inject.Injector(inject.Fault("slow", 0, 2), rank=0)
    for step in (1, 2, 3):
        s.after_step(step, 0.1)
    assert slept == pytest.approx([0.4, 0.4])


def _progress(run: RunFiles, rank: int, host: str, step: int, phase: str) -> None:
    path = run.progress_file(rank, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rank": rank, "step": step, "phase": phase, "t": 1.0, "host": host}))


def test_blame_a_hang_names_the_hung_ranks_node(tmp_path: Path):
    run = RunFiles(tmp_path)
    _progress(run, 0, "node1", 5, "forward")
    _progress(run, 1, "node2", 5, "data")
    run.logs.mkdir()
    run.watchdog_verdict(0).write_text(json.dumps({**verdict(progress.read_all(run, 0))}))
    found = blame.blame(run, 0, HUNG_EXIT_CODE)
    assert found is not None and found.nodes == ("node2",) and found.reason.startswith("hang: rank 1 hung")


def test_blame_a_sigkilled_rank_names_its_node_and_an_exception_names_none(tmp_path: Path):
    run = RunFiles(tmp_path)
    run.logs.mkdir()
    _progress(run, 0, "node1", 5, "forward")
    run.rank_exit(0, 0).write_text(json.dumps({"rank": 0, "code": -9, "host": "node1"}))
    found = blame.blame(run, 0, 137)
    assert found is not None and found.nodes == ("node1",) and "SIGKILL" in found.reason
    run.rank_exit(0, 0).unlink()
    (run.logs / "rank-0.restart-0.log").write_text("Traceback (most recent call last):\nValueError: bad batch\n")
    assert blame.blame(run, 0, 1) is None  # the script's own error would fail anywhere: no retry


def test_suspect_nodes_expire(hpc_home):
    suspects.remember(["node3"], "hang", "12", hours=1)
    assert suspects.excluded() == ["node3"]
    assert suspects.load(now=time.time() + 2 * 3600) == {}
    (hpc_home / "suspect-nodes.json").write_text("{not json")
    assert suspects.excluded() == []


def test_render_and_runtime_agree_on_the_hung_exit_code_and_injection_variable():
    from hpclaunch.submission import render as r

    assert r.HUNG_EXIT_CODE == HUNG_EXIT_CODE and r.INJECT_ENV == inject.ENV
