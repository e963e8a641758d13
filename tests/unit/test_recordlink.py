"""Node records over TCP to node 0 (hpclaunch/runtime/node/recordlink.py): in a multi-node launch node 0's supervisor
holds every node's record in memory and writes them all in one file; a node that cannot reach it writes its own, and
readers take each node's newest. Real listeners on 127.0.0.1, real node writers and real supervisor processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.runtime.node import blame, noderecord, progress, recordlink
from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]


def _rank(writer: noderecord.NodeWriter, rank: int, step: int, phase: str = "forward") -> None:
    """Rank `rank` of `writer`'s node reports `step` into the node's memory, as a training loop does."""
    p = progress.Progress(noderecord.rank_file(writer.folder, rank), rank, interval=3600)
    p.enter(phase, step)
    p.flush()


def _writers(run: RunFiles, nodes: int, job: str = "unit-links") -> list[noderecord.NodeWriter]:
    """Node 0 listening on a port of its own, then the other nodes sending to it."""
    first = noderecord.NodeWriter(run, "0", 0, job, link=("127.0.0.1", 0), nodes=nodes)
    assert first.collector is not None and first.collector.port
    link = ("127.0.0.1", first.collector.port)
    return [first, *(noderecord.NodeWriter(run, str(k), 0, job, link=link, nodes=nodes) for k in range(1, nodes))]


def _files(run: RunFiles) -> list[str]:
    return sorted(p.name for p in run.progress.iterdir())


def test_the_nodes_records_reach_the_run_directory_in_node_0s_one_file(tmp_path: Path):
    run = RunFiles(tmp_path)
    writers = _writers(run, 3)
    try:
        for k, w in enumerate(writers):
            _rank(w, k, 7)
            w.tick(time.time())  # a rank appeared: published at once
        # nodes 1 and 2 sent theirs: node 0 holds every rank in memory, its slow-node judge reads no file
        assert {r: rec["step"] for r, rec in writers[0].job_ranks(files=False).items()} == {0: 7, 1: 7, 2: 7}
        writers[0].tick(time.time() + noderecord.PUBLISH_INTERVAL)  # node 0's next publish writes them all
        assert _files(run) == ["node-0.restart-0.json"]
        assert {r: rec["step"] for r, rec in run.progress_records(0).items()} == {0: 7, 1: 7, 2: 7}
        # the ranks' windows for the slow-node judge stay in node 0's memory, out of the file every reader parses
        assert all("hw" in rec for rec in writers[0].job_ranks(files=False).values())
        assert not any("hw" in rec for rec in run.progress_records(0).values())
        # node 0 wrote at its start, when its rank appeared and at its next publish; the others wrote nothing
        assert [w.files for w in writers] == [3, 0, 0] and [w.writes for w in writers] == [3, 2, 2]
    finally:
        for w in reversed(writers):
            w.close(0)
    # the ends, each written by node 0 before it answered: still one file, every node ended with its code
    assert _files(run) == ["node-0.restart-0.json"]
    ends = {r["node"]: r["code"] for r in run.node_record_data(0)}
    assert ends == {"0": 0, "1": 0, "2": 0} and blame.lost_nodes(run, 0) == []


def test_an_end_is_answered_only_once_node_0_has_written_it(tmp_path: Path):
    run = RunFiles(tmp_path)
    first, second = _writers(run, 2)
    try:
        second.close(3)  # returns once node 0 answered
        held = json.loads(run.node_record(0, 0).read_text())["nodes"]["1"]
        assert held["code"] == 3 and "ended" in held
        assert not run.node_record(1, 0).exists()
    finally:
        first.close(0)


def test_an_end_that_came_in_as_node_0_stops_is_written_and_answered(tmp_path: Path):
    """Every node ends at once: node 0 stops listening with node 1's end still gathered for the next write (a long
    gather here, so that it surely is): it writes it and answers before it stops, and node 1 writes no file."""
    run = RunFiles(tmp_path)
    first, second = _writers(run, 2, job="unit-stop")
    assert first.collector is not None and second.sender is not None
    first.collector.urgent_gap = second.sender.urgent_timeout = 600.0
    ending = threading.Thread(target=second.close, args=(0,))
    ending.start()
    try:
        _until(lambda: "ended" in first.collector.snapshot().get("1", {}), "node 1's end came in", [])  # type: ignore[union-attr]
        first.close(0)
    finally:
        ending.join()
    assert _files(run) == ["node-0.restart-0.json"] and second.files == 0
    assert {r["node"]: r["code"] for r in run.node_record_data(0)} == {"0": 0, "1": 0}


def test_a_node_started_before_node_0_listens_waits_for_it(tmp_path: Path):
    run, port = RunFiles(tmp_path), _free_port()
    early: list[noderecord.NodeWriter] = []
    starting = threading.Thread(target=lambda: early.append(noderecord.NodeWriter(
        run, "1", 0, "unit-early", link=("127.0.0.1", port), nodes=2, patience=600.0)))
    starting.start()  # node 1's first record: refused until node 0 listens
    first = noderecord.NodeWriter(run, "0", 0, "unit-early", link=("127.0.0.1", port), nodes=2)
    starting.join()
    early[0].close(0)
    first.close(0)
    assert _files(run) == ["node-0.restart-0.json"] and early[0].files == 0


def test_a_node_that_cannot_reach_node_0_writes_its_own_record_and_the_newest_counts(tmp_path: Path):
    run = RunFiles(tmp_path)
    first, second = _writers(run, 2, job="unit-fallback")
    _rank(second, 1, 4)
    second.tick(time.time())
    first.linger = 0.0
    first.close(0)  # node 0 is gone: it wrote node 1's step 4
    assert run.progress_records(0)[1]["step"] == 4 and not run.node_record(1, 0).exists()
    _rank(second, 1, 9)
    second.tick(time.time() + noderecord.PUBLISH_INTERVAL)  # no answer: node 1's own file
    second.close(0)
    assert _files(run) == ["node-0.restart-0.json", "node-1.restart-0.json"]
    # node 0's file still holds node 1's older record; readers take node 1's newest, from its own file
    assert json.loads(run.node_record(0, 0).read_text())["nodes"]["1"]["ranks"]["1"]["step"] == 4
    assert run.progress_records(0)[1]["step"] == 9
    ends = {r["node"]: (r["code"], r["files"]) for r in run.node_record_data(0)}
    assert ends == {"0": (0, 2), "1": (0, 2)}  # node 0's: at its start and end; node 1's: at step 9 and its end


def test_after_a_silent_node_0_ordinary_records_go_to_the_file_for_a_while_and_ends_still_try(tmp_path):
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts the connection; nobody ever answers
    port = silent.getsockname()[1]
    sender = recordlink.Sender(("127.0.0.1", port), "unit-quiet", 0, "1", timeout=0.2, retry_after=3600.0)
    try:
        assert not sender.send({"at": 1.0})  # no answer to the hello: the caller writes its own file
        silent.close()
        node0 = recordlink.Collector(port, "unit-quiet", 0, lambda records: True)
        try:
            assert node0.port == port
            # node 0 answers now, but the node does not try it again before retry_after: nothing sent
            assert not sender.send({"at": 2.0}) and node0.snapshot() == {}
            # an end must reach the run directory by node 0 where it can: it tries at once
            assert sender.send({"at": 3.0, "ended": 4.0, "code": 0}, urgent=True)
            assert node0.snapshot()["1"]["at"] == 3.0
        finally:
            node0.close()
    finally:
        sender.close()
        silent.close()


def test_after_a_refused_connection_the_next_record_tries_node_0_again():
    port = _free_port()
    sender = recordlink.Sender(("127.0.0.1", port), "unit-refused", 0, "1", retry_after=3600.0)
    node0 = None
    try:
        assert not sender.send({"at": 1.0})  # not listening yet: refused at once, the loop was not held
        node0 = recordlink.Collector(port, "unit-refused", 0, lambda records: True)
        assert sender.send({"at": 2.0}) and node0.snapshot()["1"]["at"] == 2.0
    finally:
        sender.close()
        if node0 is not None:
            node0.close()


def test_a_listener_of_another_job_is_never_taken_for_node_0(tmp_path: Path):
    run = RunFiles(tmp_path)
    other = recordlink.Collector(0, "another-job", 0, lambda records: True)
    try:
        assert other.port
        node = noderecord.NodeWriter(run, "1", 0, "unit-stray", link=("127.0.0.1", other.port), nodes=2)
        node.close(0)
        assert other.snapshot() == {}  # it was told nothing
        assert _files(run) == ["node-1.restart-0.json"]
        assert json.loads(run.node_record(1, 0).read_text())["code"] == 0
    finally:
        other.close()


def test_the_records_port_is_the_jobs_and_restarts_and_one_node_has_none():
    env = {"HPCLAUNCH_NNODES": "2", "HPCLAUNCH_HEAD_NODE": "localhost", "HPCLAUNCH_JOB_ID": "42"}
    host, port = recordlink.address({**env, "HPCLAUNCH_RESTART": "0"}) or ("", 0)
    assert host == "127.0.0.1" and recordlink.PORT_BASE <= port < recordlink.PORT_BASE + recordlink.PORT_SPAN
    assert recordlink.address({**env, "HPCLAUNCH_RESTART": "1"}) != (host, port)  # a relaunch meets afresh
    assert recordlink.address({**env, recordlink.PORT_ENV: "6123"}) == (host, 6123)
    assert recordlink.address({**env, "HPCLAUNCH_NNODES": "1"}) is None


# --- real supervisors: node 0 and node 1 of a 2-node launch on this machine (1 rank each)

_TRAIN = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from hpclaunch.runtime.node import progress
    rank, marks = int(os.environ["RANK"]), Path(sys.argv[1])
    p = progress.current()
    for step in range(1, 4):
        progress.enter("optimizer", step)
    p.flush()
    Path(marks, f"stepped-{rank}").write_text("")
    while not Path(marks, f"go-{rank}").exists():
        time.sleep(0.02)
    progress.enter("done", 3)
    p.flush()
""")


def _supervisor(tmp_path: Path, node: int, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCLAUNCH_")}
    env.update(HPCLAUNCH_RUN_DIR=str(tmp_path / "run"), HPCLAUNCH_RESTART="0", HPCLAUNCH_NODE_RANK=str(node),
               HPCLAUNCH_JOB_ID=f"unit-links-{os.getpid()}", HPCLAUNCH_NNODES="2", HPCLAUNCH_HEAD_NODE="127.0.0.1",
               HPCLAUNCH_RECORDS_PORT=str(port), PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--ranks=2:1", "--poll=0.2",
                             "--", sys.executable, "-c", _TRAIN, str(tmp_path)], env=env, start_new_session=True,
                            stderr=subprocess.PIPE, text=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ended(proc: subprocess.Popen) -> None:
    """`proc` (a supervisor) ended with 0."""
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def _until(done: Callable[[], object], what: str, procs: list[subprocess.Popen]) -> None:
    end = time.monotonic() + 60
    while not done():
        for proc in procs:
            assert proc.poll() is None, f"a supervisor ended ({proc.returncode}) before {what}: {proc.stderr}"
        assert time.monotonic() < end, f"not within 60 s: {what}"
        time.sleep(0.05)


@pytest.fixture
def launch(tmp_path: Path):
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _stepping(tmp_path: Path, launch: list[subprocess.Popen]) -> RunFiles:
    """Node 0's supervisor, listening once its first record is there, then node 1's; both ranks stepped."""
    run, port = RunFiles(tmp_path / "run"), _free_port()
    launch.append(_supervisor(tmp_path, 0, port))
    _until(run.node_record(0, 0).exists, "node 0's first record (it listens then)", launch)
    launch.append(_supervisor(tmp_path, 1, port))
    _until(lambda: (tmp_path / "stepped-0").exists() and (tmp_path / "stepped-1").exists(), "both ranks stepped",
           launch)
    return run


def test_two_supervisors_leave_one_file_with_both_nodes_ends(tmp_path: Path, launch: list[subprocess.Popen]):
    run = _stepping(tmp_path, launch)
    (tmp_path / "go-1").write_text("")
    _ended(launch[1])  # node 1 ended: node 0 answered its end
    (tmp_path / "go-0").write_text("")
    _ended(launch[0])
    assert _files(run) == ["node-0.restart-0.json"]  # node 1 never wrote the run directory's progress
    records: dict[object, dict[str, Any]] = {r["node"]: r for r in run.node_record_data(0)}
    assert records["0"]["code"] == 0 and (records["1"]["code"], records["1"]["files"]) == (0, 0)
    assert {r: (rec["step"], rec["phase"]) for r, rec in run.progress_records(0).items()} == {
        0: (3, "done"), 1: (3, "done")}


def test_node_0_lost_its_peer_still_records_its_end_in_its_own_file(tmp_path: Path, launch: list[subprocess.Popen]):
    run = _stepping(tmp_path, launch)
    os.killpg(launch[0].pid, signal.SIGKILL)  # node 0 lost with everything on it
    launch[0].wait()
    (tmp_path / "go-1").write_text("")
    _ended(launch[1])
    assert _files(run) == ["node-0.restart-0.json", "node-1.restart-0.json"]
    records: dict[object, dict[str, Any]] = {r["node"]: r for r in run.node_record_data(0)}
    assert "ended" not in records["0"] and "signalled" not in records["0"]  # lost: blame's evidence
    # node 1's end in its own file; every record before node 0 was lost went to node 0, so its own file holds at
    # most one more: the one its ranks' "done" may have published between the kill and its end (a race, CI saw both)
    assert records["1"]["code"] == 0 and records["1"]["files"] in (1, 2) and records["1"]["writes"] >= 2
    assert run.progress_records(0)[1]["phase"] == "done"
