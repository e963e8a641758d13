"""What a node costs the shared run directory in steady training (docs/scale.md), counted with strace: a node record
published in three calls (open, write, rename; its folder made once), and a rank's output lines written to its log
and the job's output in batches, with every line there when the rank ends, a crash's last lines included."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")


def _traced(tmp_path: Path, argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run `argv` under strace -f; (the process, the traced calls as strace writes them, one per line)."""
    trace = tmp_path / "trace"
    strace = ["strace", "-f", "-qq", "-y", "-e", "trace=%file,write,read,getdents64", "-o", str(trace)]
    proc = subprocess.run([*strace, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})
    return proc, trace.read_text().splitlines()


def _on(calls: list[str], path: Path) -> list[str]:
    """The calls on `path` or a file beside it of the same name and another suffix (.tmp): their names."""
    named = re.compile(rf"(\w+)\((?:[^,]*, )?(?:\S*<)?\"?{re.escape(str(path))}")
    return [m.group(1) for line in calls if (m := named.search(line.split(" ", 1)[-1]))]


def test_a_node_record_is_published_in_three_calls_and_its_folder_made_once(tmp_path):
    run = tmp_path / "run"
    code = ("import time\nfrom hpclaunch.runtime.node.noderecord import NodeWriter\nfrom hpclaunch.state.runfiles "
            f"import RunFiles\nw = NodeWriter(RunFiles({str(run)!r}), '0', 0, 'job1')\n"
            "for i in range(3):\n    w.publish(time.time() + i)\n")
    proc, calls = _traced(tmp_path, [sys.executable, "-c", code], {})
    assert proc.returncode == 0, proc.stderr
    (record,) = (run / "progress").glob("node-0.restart-0.json")
    assert _on(calls, record) == ["openat", "write", "rename"] * 4  # at start, then three more
    assert len(_on(calls, record.parent)) - len(_on(calls, record)) <= 3  # the folder: mkdir and its stat, once


def test_reading_every_node_record_costs_one_listing_and_two_calls_a_node(tmp_path):
    """Node 0's supervisor reads the job's node records once per publishing interval (slow nodes, hangs)."""
    run = tmp_path / "run"
    code = ("import time\nfrom hpclaunch.runtime.node.noderecord import NodeWriter\nfrom hpclaunch.state.runfiles "
            f"import RunFiles\nrun = RunFiles({str(run)!r})\n"
            "for node in '0123':\n    NodeWriter(run, node, 0, 'job1')\n"
            "print('READ', flush=True)\nassert len(run.node_records(0)) == 4\nrun.progress_records(0)\n")
    proc, calls = _traced(tmp_path, [sys.executable, "-c", code], {})
    assert proc.returncode == 0, proc.stderr
    after = calls[next(i for i, line in enumerate(calls) if "READ" in line) + 1:]
    progress = run / "progress"
    on_records = [c for c in _on(after, progress) if c != "getdents64"]
    listing = [c for c in _on(after, progress) if c == "getdents64"]
    # node_records: one listing; progress_records: one listing, and an open and a read per record
    assert sorted(on_records) == sorted(["openat", "newfstatat"] * 2 + ["openat", "read"] * 4), on_records
    assert len(listing) == 4  # two listings of two getdents each (the second says the end)


def test_in_a_multi_node_launch_only_node_0_writes_the_records_three_calls_a_publish(tmp_path):
    """Nodes 1-3 send their records to node 0 over TCP (hpclaunch/runtime/node/recordlink.py); node 0 writes them all
    in its one file, and its slow-node judge reads them from memory: no call on the run directory but its writes."""
    run = tmp_path / "run"
    code = ("import time\nfrom hpclaunch.runtime.node.noderecord import NodeWriter\nfrom hpclaunch.state.runfiles "
            f"import RunFiles\nrun = RunFiles({str(run)!r})\n"
            "w0 = NodeWriter(run, '0', 0, 'job1', link=('127.0.0.1', 0), nodes=4)\n"
            "link = ('127.0.0.1', w0.collector.port)\n"
            "ws = [w0] + [NodeWriter(run, n, 0, 'job1', link=link, nodes=4) for n in '123']\n"
            "print('STEADY', flush=True)\n"
            "for i in range(1, 4):\n    for w in reversed(ws):\n        w.publish(time.time() + i)\n"
            "    w0.job_ranks(files=False)\n"
            "print('END', flush=True)\n")
    proc, calls = _traced(tmp_path, [sys.executable, "-c", code], {})
    assert proc.returncode == 0, proc.stderr
    start = next(i for i, line in enumerate(calls) if "STEADY" in line)
    steady = calls[start + 1:next(i for i, line in enumerate(calls) if "END" in line)]
    assert _on(steady, run / "progress") == ["openat", "write", "rename"] * 3  # node 0's file, once a round
    assert sorted(p.name for p in (run / "progress").iterdir()) == ["node-0.restart-0.json"]


def _rank(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess, list[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(body)
    logs = tmp_path / "logs"
    env = {k: v for k, v in os.environ.items() if k.startswith("HPCLAUNCH_")}
    proc, calls = _traced(tmp_path, [sys.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(script)],
                          {**dict.fromkeys(env, ""), "HPCLAUNCH_LOG_DIR": str(logs), "RANK": "3", "LOCAL_RANK": "1"})
    return proc, calls, logs / "rank-3.restart-0.log"


def test_a_ranks_lines_reach_its_log_and_the_jobs_output_in_one_write(tmp_path):
    proc, calls, log = _rank(tmp_path, "for i in range(20):\n    print(f'step {i}', flush=True)\n")
    assert proc.returncode == 0, proc.stderr
    assert log.read_text() == "".join(f"step {i}\n" for i in range(20))
    assert proc.stdout == "".join(f"[rank3]: step {i}\n" for i in range(20))
    assert _on(calls, log).count("write") == 1  # 20 lines flushed one by one by the rank: one write


def test_a_crashing_ranks_last_lines_are_in_its_log(tmp_path):
    proc, _calls, log = _rank(tmp_path, "print('loading', flush=True)\nraise SystemExit('the last words')\n")
    assert proc.returncode == 1
    assert log.read_text() == "loading\nthe last words\n"
    assert proc.stdout == "[rank3]: loading\n[rank3]: the last words\n"


def test_a_stop_signal_writes_the_lines_held_at_once(tmp_path):
    """Told to stop (a signal rank_exec passes on), the lines held reach the log before any kill that may follow:
    with a flush interval of 10 minutes, only the signal can have written them."""
    ready, logs = tmp_path / "ready", tmp_path / "logs"
    script = tmp_path / "train.py"
    script.write_text("import signal, time\nsignal.signal(signal.SIGTERM, lambda *a: print('told to stop', "
                      f"flush=True))\nprint('held line', flush=True)\nopen({str(ready)!r}, 'w').close()\n"
                      "time.sleep(600)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCLAUNCH_")}
    env.update(PYTHONPATH=str(REPO), HPCLAUNCH_LOG_DIR=str(logs), RANK="0", LOCAL_RANK="1",
               HPCLAUNCH_LOG_FLUSH_S="600")
    proc = subprocess.Popen([sys.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(script)], env=env,
                            stdout=subprocess.PIPE, start_new_session=True)
    log = logs / "rank-0.restart-0.log"
    try:
        _until(ready.exists)
        assert not log.exists() or log.read_text() == ""  # held
        proc.send_signal(signal.SIGTERM)
        _until(lambda: log.read_text() == "held line\ntold to stop\n")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the kill that follows a stop that did not end the rank
        proc.wait()


def _until(done, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not done():
        assert time.monotonic() < end, "not within 60 s"
        time.sleep(0.05)
