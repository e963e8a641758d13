"""The usage sampler's device tools against what real nodes print (tests/fixtures/device-tools/, each file's
source in its README.md): npu-smi's table (8 x 910B3 under load; an Atlas A3 with two chips per NPU) and
mthreads-gmi's (MTT S5000), read into the per-device dicts nvidia-smi's CSV gives; device_sample() with the
stand-ins on PATH (tests/fixtures/fake-*), first found of nvidia-smi, npu-smi, mthreads-gmi; provenance's
model count on the same recorded tables; and report's devices line from samples taken with each stand-in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpclaunch.report import usage
from hpclaunch.runtime.node import provenance, sampler

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "device-tools"
FAKE = {"nvidia-smi": FIXTURES / "fake-nvidia", "npu-smi": FIXTURES / "fake-npu",
        "mthreads-gmi": FIXTURES / "fake-mthreads"}
MIB = 2**20


def _recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


def _path(*dirs: Path) -> str:
    """`dirs`, then this machine's PATH without any folder holding a real device tool (the stand-ins need
    cat and sh)."""
    system = [p for p in os.environ["PATH"].split(os.pathsep)
              if p and not any(Path(p, tool).exists() for tool in FAKE)]
    return os.pathsep.join([*map(str, dirs), *system])


def test_npu_smi_910b3_one_device_per_npu_with_aicore_and_hbm():
    devices = sampler.parse_npu_smi_info(_recorded("npu-smi-info.910b3.txt"))
    # | 0                         | 0000:C1:00.0  | 10          0    / 0          57895/ 65536         |
    assert [d["index"] for d in devices] == list(range(8))  # the process table below adds none
    # | 0     910B3               | OK            | 121.6       40                0    / 0             |
    assert devices[0] == pytest.approx({"index": 0, "utilization": 0.10, "memory_used_bytes": 57895 * MIB,
                                        "memory_total_bytes": 65536 * MIB, "power_w": 121.6})
    assert [d["power_w"] for d in devices] == [121.6, 116.4, 116.6, 123.2, 121.4, 126.1, 122.4, 119.9]
    # | 0                         | 0000:01:00.0  | 10          0    / 0          58114/ 65536         |  (NPU 4)
    assert (devices[4]["utilization"], devices[4]["memory_used_bytes"]) == (pytest.approx(0.10), 58114 * MIB)
    # | 0                         | 0000:02:00.0  | 9           0    / 0          57856/ 65536         |  (NPU 5)
    assert (devices[5]["utilization"], devices[5]["memory_used_bytes"]) == (pytest.approx(0.09), 57856 * MIB)
    assert devices[6]["utilization"] == pytest.approx(0.15) and devices[7]["utilization"] == pytest.approx(0.14)
    assert {d["memory_total_bytes"] for d in devices} == {65536 * MIB}


def test_npu_smi_atlas_a3_one_device_per_chip_indexed_by_phy_id():
    devices = sampler.parse_npu_smi_info(_recorded("npu-smi-info.a3.txt"))
    # | 2     Ascend910           | OK            | 164.6       29                0    / 0             |
    # | 0     4                   | 0000:95:00.0  | 0           0    / 0          62308/ 65536         |
    # | 2     Ascend910           | OK            | -           29                0    / 0             |
    # | 1     5                   | 0000:97:00.0  | 0           0    / 0          61795/ 65536         |
    assert [d["index"] for d in devices] == list(range(16))  # 8 NPUs x 2 chips; process rows add none
    assert devices[4] == {"index": 4, "utilization": 0.0, "memory_used_bytes": 62308 * MIB,
                          "memory_total_bytes": 65536 * MIB, "power_w": 164.6}
    assert devices[5]["power_w"] is None  # the second chip's power reads `-`: one reading per NPU
    assert devices[5]["memory_used_bytes"] == 61795 * MIB and devices[15]["memory_used_bytes"] == 2885 * MIB


def test_mthreads_gmi_one_device_per_gpu_with_percent_and_mem():
    devices = sampler.parse_mthreads_gmi(_recorded("mthreads-gmi.s5000-excerpt.txt"))
    # 0    MTT S5000            |00000000:2a:00.0    |0%    66641MiB(81920MiB)
    # 1    MTT S5000            |00000000:3a:00.0    |0%    64889MiB(81920MiB)
    # 2    MTT S5000            |00000000:4c:00.0    |0%    10MiB(81920MiB)
    assert devices == [{"index": i, "utilization": 0.0, "memory_used_bytes": used * MIB,
                        "memory_total_bytes": 81920 * MIB, "power_w": None}  # the table shows no power
                       for i, used in enumerate((66641, 64889, 10))]
    idle = sampler.parse_mthreads_gmi(_recorded("mthreads-gmi.s5000.txt"))  # ends with a Processes table
    assert [d["index"] for d in idle] == list(range(8))
    assert {(d["memory_used_bytes"], d["memory_total_bytes"]) for d in idle} == {(0, 81920 * MIB)}


def test_nvidia_smi_power_draw_from_a_recorded_log():
    # the recorded `--format=csv` log (GH200): its header names the columns, the values carry their units
    # 2026/03/06 16:46:01, 0, NVIDIA GH200 120GB,  0 %, 3707 MiB, 97871 MiB, 136.90 W, 33
    rows = sampler.parse_nvidia_query(_recorded("nvidia-smi-query.gh200-power.txt"))
    assert [r["power_w"] for r in rows] == [84.33, 84.25, 99.02, 128.78, 136.90]  # the "..." line is none
    assert rows[-1] == {"index": 0, "utilization": 0.0, "memory_used_bytes": 3707 * MIB,
                        "memory_total_bytes": 97871 * MIB, "power_w": 136.90}
    assert rows[2]["utilization"] == pytest.approx(0.02)
    # what the sampler asks (noheader, nounits; power.draw last), as the stand-in and the GH200 would answer it
    assert sampler.parse_nvidia_query("0, 2, 1035, 97871, 99.02\n1, 0, 2, 97871, [N/A]\n") == [
        {"index": 0, "utilization": 0.02, "memory_used_bytes": 1035 * MIB, "memory_total_bytes": 97871 * MIB,
         "power_w": 99.02},
        {"index": 1, "utilization": 0.0, "memory_used_bytes": 2 * MIB, "memory_total_bytes": 97871 * MIB,
         "power_w": None}]


def test_values_a_tool_does_not_give_are_none_not_a_crash():
    # Recorded rows with the tools' marks for "no value" put in: `-` (npu-smi's power column on A3's second
    # chip), NA, N/A. A row without a used / total pair has no memory, not Memory-Usage's 0 / 0.
    npu = _recorded("npu-smi-info.910b3.txt").replace("| 10          0    / 0          57895/ 65536",
                                                      "| -           0    / 0          NA               ")
    assert sampler.parse_npu_smi_info(npu)[0] == {"index": 0, "utilization": None, "memory_used_bytes": None,
                                                  "memory_total_bytes": None, "power_w": 121.6}
    assert sampler.parse_npu_smi_info(npu)[1]["memory_used_bytes"] == 57898 * MIB
    gmi = _recorded("mthreads-gmi.s5000-excerpt.txt").replace("|0%    66641MiB(81920MiB)", "|N/A   N/A")
    assert sampler.parse_mthreads_gmi(gmi)[0] == {"index": 0, "utilization": None, "memory_used_bytes": None,
                                                  "memory_total_bytes": None, "power_w": None}
    for parse in (sampler.parse_npu_smi_info, sampler.parse_mthreads_gmi):
        assert parse("") == [] and parse("dcmi module initialize failed. ret is -8005\n") == []


def test_provenance_counts_npus_not_process_rows_or_chip_rows():
    assert provenance.parse_npu_smi(_recorded("npu-smi-info.910b3.txt")) == {
        "models": ["910B3"], "driver": "24.1.rc2.1", "count": 8}
    assert provenance.parse_npu_smi(_recorded("npu-smi-info.a3.txt")) == {
        "models": ["Ascend910"], "driver": "25.3.rc1", "count": 16}  # one per chip, as the sampler counts


@pytest.mark.parametrize(("tool", "count"), [("nvidia-smi", 2), ("npu-smi", 8), ("mthreads-gmi", 3)])
def test_device_sample_reads_the_stand_in_on_path(monkeypatch, tool, count):
    monkeypatch.setenv("PATH", _path(FAKE[tool]))
    found, devices = sampler.device_sample()
    assert found == tool and devices is not None and len(devices) == count
    assert all(isinstance(d["memory_total_bytes"], int) and d["memory_total_bytes"] > 0 for d in devices)


def test_device_sample_takes_nvidia_then_npu_then_mthreads(monkeypatch):
    monkeypatch.setenv("PATH", _path(FAKE["mthreads-gmi"], FAKE["npu-smi"], FAKE["nvidia-smi"]))
    assert sampler.device_sample()[0] == "nvidia-smi"
    monkeypatch.setenv("PATH", _path(FAKE["mthreads-gmi"], FAKE["npu-smi"]))
    assert sampler.device_sample()[0] == "npu-smi"
    monkeypatch.setenv("PATH", _path())
    assert sampler.device_sample() == (None, None)


def test_device_sample_with_another_recording_and_with_a_failing_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", _path(FAKE["npu-smi"]))
    monkeypatch.setenv("FAKE_NPU_SMI_FIXTURE", "npu-smi-info.a3.txt")
    tool, devices = sampler.device_sample()
    assert tool == "npu-smi" and devices == sampler.parse_npu_smi_info(_recorded("npu-smi-info.a3.txt"))
    broken = tmp_path / "npu-smi"
    broken.write_text("#!/bin/sh\necho 'dcmi module initialize failed. ret is -8005' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", _path(tmp_path))
    assert sampler.device_sample() == ("npu-smi", [])


def test_provenance_reads_the_npu_stand_in(monkeypatch):
    monkeypatch.setenv("PATH", _path(FAKE["npu-smi"]))
    assert provenance.devices() == {"tool": "npu-smi", "models": ["910B3"], "driver": "24.1.rc2.1", "count": 8}


def test_provenance_reads_the_mthreads_stand_in(monkeypatch):
    monkeypatch.setenv("PATH", _path(FAKE["mthreads-gmi"]))
    monkeypatch.setenv("FAKE_MTHREADS_GMI_FIXTURE", "mthreads-gmi.s5000.txt")
    assert provenance.devices() == {"tool": "mthreads-gmi", "models": ["MTT S5000"], "driver": "5.1.0-server",
                                    "count": 8}


@pytest.mark.parametrize(("tool", "line"), [
    ("npu-smi", "8 device(s) (npu-smi, 16 samples), utilisation 11% on average, peak memory 56.8 GiB of 64.0 GiB"),
    ("mthreads-gmi", "3 device(s) (mthreads-gmi, 6 samples), utilisation 0% on average, peak memory 65.1 GiB of "
                     "80.0 GiB"),
])
def test_report_devices_line_from_samples_taken_with_each_stand_in(monkeypatch, tmp_path, tool, line):
    monkeypatch.setenv("PATH", _path(FAKE[tool]))
    node = sampler.Sampler(tmp_path / "usage" / "node-0.restart-0.jsonl", "0", lambda: [os.getpid()], 30.0)
    node.sample(1000.0)
    node.sample(1030.0, ended=True)
    rec = json.loads((tmp_path / "usage" / "node-0.restart-0.jsonl").read_text().splitlines()[0])
    assert rec["tool"] == tool
    dev = usage.devices(usage.read_samples(tmp_path / "usage"))
    assert usage.describe_devices(dev, lambda n: f"{n / 2**30:.1f} GiB") == line
