"""The usage sampler's peak memory: a rank that grew and shrank between two samples (or ended before the last)
still counts with its high-water mark (VmHWM), so a short job's report gives its real peak."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from hpclaunch.report import usage
from hpclaunch.runtime.node import sampler
from hpclaunch.schedulers import JobStatus

MIB = 2**20
# allocates and touches 200 MiB, frees it, says so, then waits to be told to end
GROW_AND_SHRINK = ("import sys; b = bytearray(200 * 1024 * 1024); del b; print('freed', flush=True); "
                   "sys.stdin.readline()")


def test_a_peak_between_samples_is_kept(tmp_path: Path):
    proc = subprocess.Popen([sys.executable, "-c", GROW_AND_SHRINK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        path = tmp_path / "usage" / "node-0.restart-0.jsonl"
        node = sampler.Sampler(path, "0", lambda: [proc.pid], 30.0)
        assert proc.stdout is not None and proc.stdout.readline() == "freed\n"
        node.poll(time.time())  # the first sample comes at once: after the peak, with little resident memory
        rec = node.sample()
    finally:
        proc.communicate("end\n", timeout=60)
    assert rec["rss_bytes"] < 100 * MIB <= 200 * MIB <= rec["peak_rss_bytes"]
    files = usage.read_samples(path.parent)
    assert [json.loads(line)["peak_rss_bytes"] >= 200 * MIB for line in path.read_text().splitlines()] == [True] * 2
    base = usage.from_status(JobStatus("7", "COMPLETED", elapsed="0:20", time_limit="10:00", source="local"))
    assert usage.with_samples(base, files)["max_rss_bytes"] >= 200 * MIB


def test_a_process_seen_between_samples_keeps_its_peak_after_it_ends(tmp_path: Path):
    proc = subprocess.Popen([sys.executable, "-c", GROW_AND_SHRINK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    node = sampler.Sampler(tmp_path / "node-0.restart-0.jsonl", "0", lambda: [proc.pid], 30.0)
    node.next_at = time.time() + 3600  # no sample while it runs: only the readings between samples see it
    assert proc.stdout is not None and proc.stdout.readline() == "freed\n"
    node.poll(time.time())
    proc.communicate("end\n", timeout=60)
    assert node.sample()["peak_rss_bytes"] >= 200 * MIB  # the process is gone; its high-water mark stays
