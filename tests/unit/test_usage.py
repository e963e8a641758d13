"""hpclaunch.report.usage: efficiency from sacct's parsable output (a real answer of the dev cluster's sacct), from
the status alone without accounting, and the warnings in words."""

from __future__ import annotations

import pytest

from hpclaunch.report import usage
from hpclaunch.schedulers import JobStatus
from hpclaunch.schedulers.base import clock_seconds
from hpclaunch.schedulers.slurm import accounting

# `sacct --parsable2 --format=accounting.SACCT_FIELDS --jobs=189_0` on the dev cluster (GPT-2 tiny, one node)
SACCT = """JobID|State|ElapsedRaw|TimelimitRaw|TotalCPU|AllocCPUS|MaxRSS|ReqMem|NNodes
189_0|COMPLETED|45|20|00:07.896|1||4000M|1
189_0.batch|COMPLETED|45||00:00.277|1|12124K||1
189_0.0|COMPLETED|35||00:07.618|1|610072K||1
"""


def test_usage_from_sacct():
    u = usage.summarize(**accounting.from_sacct(SACCT, "189_0"))
    assert u is not None
    assert (u["elapsed_s"], u["time_limit_s"], u["cpu_s"], u["cpus"]) == (45, 1200, pytest.approx(7.896), 1)
    assert u["time_used"] == pytest.approx(45 / 1200, abs=1e-4)
    assert u["cpu_efficiency"] == pytest.approx(7.896 / 45, abs=1e-4)
    assert u["max_rss_bytes"] == 610072 * 1024 and u["req_mem_per_node_bytes"] == 4000 * 2**20
    # 45 s is mostly start-up: the time it asked for is advice, its CPUs and memory are not
    assert [w.split(" ", 3)[:3] for w in u["warnings"]] == [["the", "job", "ran"]]
    assert "(0:45 of 20:00)" in u["warnings"][0]
    assert u["advice_note"] == "no advice on CPUs or memory: the job ran 0:45, mostly start-up (under 2:00)"
    longer = usage.summarize(**{**accounting.from_sacct(SACCT, "189_0"), "elapsed_s": 450, "cpu_s": 78.96})
    assert [w.split(" ", 3)[:3] for w in longer["warnings"]] == [["the", "job", "ran"], ["the", "job", "kept"],
                                                                ["the", "job's", "peak"]]
    assert "advice_note" not in longer
    assert usage.describe(u) == ("elapsed 0:45 of 20:00 (4%), CPU efficiency 18% of 1 CPU, "
                                 "peak memory 596 MiB of 4000 MiB per node (15%)")
    assert accounting.from_sacct(SACCT, "190") is None and accounting.from_sacct("", "189_0") is None


def test_slurm_sizes_and_durations():
    assert accounting.size_bytes("4000Mn", nodes=2) == 8000 * 2**20
    assert accounting.size_bytes("2000Mc", cpus=4) == 8000 * 2**20
    assert accounting.size_bytes("1.5G") == int(1.5 * 2**30) and accounting.size_bytes("") is None
    assert accounting.size_bytes("4000", bare="M") == 4000 * 2**20
    assert [clock_seconds(t) for t in ("1-02:03:04", "1:02:03", "03:04.5", "UNLIMITED")] == [
        93784, 3723, 184.5, None]


def test_without_accounting_only_the_time_and_no_warning_while_running():
    done = usage.from_status(JobStatus("7", "COMPLETED", elapsed="4:00", time_limit="1:00:00", source="scontrol"))
    assert done["time_used"] == pytest.approx(240 / 3600, abs=1e-4) and done["cpu_efficiency"] is None
    assert len(done["warnings"]) == 1 and "sacct" in done["note"]
    running = usage.from_status(JobStatus("7", "RUNNING", elapsed="4:00", time_limit="1:00:00", source="squeue"))
    assert running["warnings"] == []
    well_used = usage.from_status(JobStatus("7", "COMPLETED", elapsed="50:00", time_limit="1:00:00"))
    assert well_used["warnings"] == []


def test_nvidia_smi_query_rows_with_and_without_values():
    from hpclaunch.runtime.node.sampler import parse_nvidia_query

    # nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits (older)
    rows = parse_nvidia_query("0, 87, 40531, 81559\n1, [N/A], [N/A], 81559\n\n")
    assert rows[0] == {"index": 0, "utilization": 0.87, "memory_used_bytes": 40531 * 2**20,
                       "memory_total_bytes": 81559 * 2**20, "power_w": None}  # a sampler from before power.draw
    assert rows[1]["utilization"] is None and rows[1]["memory_used_bytes"] is None
    assert parse_nvidia_query("No devices were found\n") == []


def test_usage_from_samples_sums_nodes_and_keeps_the_peak():
    base = usage.from_status(JobStatus("7", "COMPLETED", elapsed="5:00", time_limit="10:00", source="scontrol"))
    node0 = [{"node": "0", "cpus": 4, "cpu_s": c, "rss_bytes": 2 * 2**30, "devices": None} for c in (50.0, 90.0)]
    node0.append({"node": "0", "cpus": 4, "cpu_s": 120.0, "rss_bytes": 3 * 2**30, "devices": None})
    node1 = [{"node": "1", "cpus": 4, "cpu_s": c, "rss_bytes": 1 * 2**30, "devices": None} for c in (10.0, 50.0, 100.0)]
    u = usage.with_samples(base, [node0, node1])
    assert (u["source"], u["cpu_s"], u["cpus"], u["nodes"], u["samples"]) == ("samples", 220.0, 8, 2, 3)
    assert u["cpu_efficiency"] == pytest.approx(220 / (300 * 8), abs=1e-4) and u["max_rss_bytes"] == 3 * 2**30
    assert any("kept its 8 CPUs 9% busy" in w for w in u["warnings"])
    assert "a peak between two of them is not seen" in u["note"]
    few = usage.with_samples(base, [node0[:2], node1])
    assert not any("CPUs" in w for w in few["warnings"]) and "2 sample(s) of a node are too few" in few["advice_note"]
    assert usage.devices([node0, node1])["note"].startswith("no device tool")


def test_a_short_jobs_peak_is_its_processes_high_water_mark():
    """Samples at the start and the end of a short job see little resident memory; the processes' high-water
    marks (peak_rss_bytes) have the peak, over the samples' rss and over sacct's sampled MaxRSS."""
    files = [[{"node": "0", "cpus": 2, "cpu_s": 0.1, "rss_bytes": 250 * 1024, "peak_rss_bytes": 250 * 1024},
              {"node": "0", "cpus": 2, "cpu_s": 9.0, "rss_bytes": 0, "peak_rss_bytes": 558 * 2**20}]]
    base = usage.from_status(JobStatus("7", "FAILED", elapsed="0:40", time_limit="10:00", source="scontrol"))
    u = usage.with_samples(base, files)
    assert u["max_rss_bytes"] == 558 * 2**20 and "high-water mark" in u["note"]
    sacct = usage.summarize(**{**accounting.from_sacct(SACCT, "189_0"), "max_rss_bytes": 244 * 1024})
    merged = usage.with_peak(sacct, files)
    assert merged["max_rss_bytes"] == 558 * 2**20 and merged["accounting_max_rss_bytes"] == 244 * 1024
    assert merged["source"] == "sacct" and "sacct's MaxRSS, sampled, was lower" in merged["note"]
    assert usage.with_peak(usage.summarize(**accounting.from_sacct(SACCT, "189_0")), files)["max_rss_bytes"] == (
        610072 * 1024)  # sacct saw more: kept


def test_a_job_that_stopped_early_gets_no_advice():
    """A job the watchdog ended ran short and idle for a reason that fewer CPUs or less time would not fix."""
    killed = usage.summarize(state="FAILED", source="sacct", elapsed_s=600, limit_s=3600, cpu_s=0.0, cpus=8,
                             nodes=1, max_rss_bytes=2**20, req_mem_per_node_bytes=2**30)
    assert killed["warnings"] == [] and killed["advice_note"] == "no advice on CPUs or memory: the job ended FAILED"


def test_a_device_tool_that_gave_nothing_is_not_called_a_cpu_node():
    failed = [{"node": "0", "cpus": 4, "cpu_s": 5.0, "rss_bytes": 2**30, "tool": "npu-smi", "devices": []}]
    note = usage.devices([failed])["note"]
    assert note.startswith("npu-smi on the job's nodes gave no device readings") and "CPU only" not in note
