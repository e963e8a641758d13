"""The node record (hpclaunch/runtime/node/noderecord.py): a node's ranks report into node-local memory, and its
supervisor alone writes the shared run directory, one file per node at a bounded rate; status and the other
readers find every rank's progress in it, a rank killed by SIGKILL included. Real processes on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hpclaunch.runtime.node import noderecord, progress
from hpclaunch.state import stragglers
from hpclaunch.state.runfiles import RunFiles


def _env(tmp_path: Path, job: str) -> dict[str, str]:
    return {**os.environ, "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_RESTART": "0", "HPCLAUNCH_NODE_RANK": "1",
            "HPCLAUNCH_JOB_ID": job, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


# node 1 of 2 (ranks 2 and 3): both report 3 steps and write 3 metrics lines; rank 3 is then killed by SIGKILL in the
# data phase of step 3, once rank 2 has finished (it waits for rank 2's mark: no race on a busy machine)
_RANK = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from hpclaunch.runtime.node import progress
    from hpclaunch.runtime.train.metrics import MetricsWriter
    rank = int(os.environ["RANK"])
    p = progress.current()
    w = MetricsWriter(Path(os.environ["HPCLAUNCH_RUN_DIR"]), rank, trackers=False)
    for step in range(1, 4):
        progress.enter("data", step - 1)
        progress.enter("optimizer", step)
        w.write("train", step=step, loss=1.0 / step)
    w.close()
    Path(sys.argv[1], f"folder-{rank}").write_text(os.environ["HPCLAUNCH_NODE_STATE"])
    if rank == 3:
        progress.enter("data", 3)
        p.flush()
        done = Path(sys.argv[1], "done-2")
        for _ in range(6000):  # rank 3 dies once rank 2 has finished (on a busy machine it may start late)
            if done.exists():
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    progress.enter("done", 3)
    p.flush()
    Path(sys.argv[1], f"done-{rank}").write_text("")
""")


def test_ranks_report_through_node_memory_and_the_node_record_keeps_a_killed_ranks_last_state(tmp_path: Path):
    run_dir, marks = tmp_path / "run", tmp_path / "marks"
    run_dir.mkdir()
    marks.mkdir()
    job = f"unit-noderecord-{os.getpid()}"
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--ranks=2:2", "--poll=0.2",
                           "--", sys.executable, "-c", _RANK, str(marks)],
                          env=_env(run_dir, job), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 137, proc.stderr  # rank 3's SIGKILL is the node's exit
    run = RunFiles(run_dir)
    # the run directory's progress folder holds the node's record and nothing per rank
    assert sorted(p.name for p in run.progress.iterdir()) == ["node-1.restart-0.json"]
    record = json.loads(run.node_record(1, 0).read_text())
    assert record["code"] == 137 and "ended" in record
    ranks = run.progress_records(0)
    assert (ranks[2]["step"], ranks[2]["phase"]) == (3, "done")
    assert (ranks[3]["step"], ranks[3]["phase"]) == (3, "data")  # killed: its last state is still published
    assert ranks[3]["host"] == os.uname().nodename and ranks[3]["win"][0] == 2
    assert run.progress_record(3, 0) == ranks[3] and progress.read_all(run, 0) == ranks
    # the ranks' metrics lines reached their files in the run directory by the supervisor, once each
    for rank in (2, 3):
        lines = [json.loads(line) for line in run.metrics_file(rank).read_text().splitlines()]
        assert [r["step"] for r in lines] == [1, 2, 3]
    # the node-local folder was in memory (or the temporary folder), keyed by job and node, and is gone
    folder = Path((marks / "folder-2").read_text())
    assert folder.name.startswith(f"{job}.node1.restart0.") and not folder.exists()


def _record(rank: int, step: int, t: float) -> dict[str, object]:
    return {"rank": rank, "step": step, "phase": "forward", "t": t, "host": "nodeA", "win": [10, 1.0, 0.5]}


def test_a_node_record_is_written_at_most_once_per_interval_while_its_ranks_change(tmp_path: Path):
    run = RunFiles(tmp_path)
    writer = noderecord.NodeWriter(run, "0", 0, f"unit-rate-{os.getpid()}", publish_interval=15.0,
                                   history_interval=600.0)
    try:
        assert writer.writes == 1  # the start
        start = float(str(writer.record["started"]))
        for i in range(1, 601):  # 300 s of ranks changing every 0.5 s, polled as often
            now = start + i * 0.5
            writer.tick(now, {0: _record(0, i, now), 1: _record(1, i, now)})
        assert writer.writes <= 1 + 300 / 15 + 1
        assert writer.writes >= 300 / 15  # and it keeps publishing
        published = run.progress_records(0)
        assert published[1]["step"] >= 600 - 30  # at most one interval behind
        writer.tick(start + 400.0, {0: _record(0, 600, start + 300.0), 1: _record(1, 600, start + 300.0)})
        before = writer.writes
        writer.tick(start + 500.0, {0: _record(0, 600, start + 300.0), 1: _record(1, 600, start + 300.0)})
        assert writer.writes == before  # nothing changed: nothing written
    finally:
        writer.close(0)
    assert not writer.folder.exists()


def test_status_reads_node_records_and_the_rank_files_of_older_run_directories(tmp_path: Path):
    run = RunFiles(tmp_path)
    run.progress.mkdir()
    node = {"node": "0", "host": "nodeA", "restart": 2, "started": 1.0,
            "ranks": {str(r): _record(r, 40, 100.0) for r in range(2)}}
    run.node_record(0, 2).write_text(json.dumps(node))
    old = _record(2, 39, 99.0)
    run.progress_file(2, 2).write_text(json.dumps(old).ljust(progress.RECORD_BYTES))
    assert sorted(run.progress_records(2)) == [0, 1, 2] and run.progress_restarts() == [2]
    slow = {**_record(1, 40, 100.0), "win": [10, 3.0, 0.0]}
    run.node_record(0, 2).write_text(json.dumps({**node, "ranks": {"0": _record(0, 40, 100.0), "1": slow}}))
    assert [s["rank"] for s in stragglers.find(run)] == [1]
