"""Node health before step 0 (hpclaunch/runtime/node/health.py, devhealth.py): the vendor tools' recorded outputs
(tests/fixtures/device-tools/README.md says where each came from), the checks run with stand-in tools that print
those recordings, the verdict over every node's file, and the settings (clear errors, shown in the dry run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from hpclaunch.runtime.node import devhealth, health
from hpclaunch.state.runfiles import RunFiles

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tests" / "fixtures" / "device-tools"
FAKE_NVIDIA = REPO / "tests" / "fixtures" / "fake-nvidia"


def _read(name: str) -> str:
    return (TOOLS / name).read_text()


def test_a_healthy_a100_has_no_problems():
    (gpu,) = devhealth.parse_nvidia_q(_read("nvidia-smi-q.a100-healthy-gpu.txt"))
    assert gpu == {"device": "00000000:35:00.0", "problems": []}


def test_the_a100_after_xid_63_needs_a_reset_for_its_pending_row_remap():
    (gpu,) = devhealth.parse_nvidia_q(_read("nvidia-smi-q.a100-xid63-excerpt.txt"))
    assert gpu["device"] == "00000000:10:1C.0"
    # 177 correctable DRAM errors are no problem; the pending remap is
    assert gpu["problems"] == ["row remapping pending (reset the GPU)"]


def test_uncorrectable_volatile_ecc_errors_fail_a_gpu():
    text = _read("nvidia-smi-q.a100-healthy-gpu.txt").replace(
        "            DRAM Uncorrectable            : 0", "            DRAM Uncorrectable            : 2", 1)
    (gpu,) = devhealth.parse_nvidia_q(text)
    assert gpu["problems"] == ["2 volatile DRAM Uncorrectable ECC errors"]


def test_the_kernel_logs_xid_line():
    assert devhealth.parse_xids(_read("kernel-log.xid63.txt")) == [
        {"device": "PCI:0000:10:1c", "xid": 63,
         "message": "pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."}]


@pytest.mark.parametrize(("name", "npus"), [("npu-smi-info.910b3.txt", 8), ("npu-smi-info.a3.txt", 8)])
def test_the_recorded_npu_tables_are_healthy(name: str, npus: int):
    found = devhealth.parse_npu_health(_read(name))
    assert len(found) == npus
    assert {d["health"] for d in found} == {"OK"} and not any(d["problems"] for d in found)


def test_an_npu_in_critical_health_fails():
    # the recorded table with its first NPU's Health column as npu-smi prints an urgent alarm
    text = _read("npu-smi-info.910b3.txt").replace("| OK ", "| Critical ", 1)
    found = devhealth.parse_npu_health(text)
    assert found[0]["problems"] == ["health Critical"] and not any(d["problems"] for d in found[1:])


def _tool_dir(tmp_path: Path, name: str, recording: str) -> Path:
    """A stand-in vendor tool that prints a recorded output for the one command health asks of it."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    tool = bindir / name
    tool.write_text(f"#!/bin/sh\ncat {TOOLS / recording}\n")
    tool.chmod(0o755)
    return bindir


def test_device_health_with_nvidia_smi_printing_the_xid63_recording(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_tool_dir(tmp_path, 'nvidia-smi', 'nvidia-smi-q.a100-xid63-excerpt.txt')}:"
                               f"{os.environ['PATH']}")
    found = health.check_device_health()
    assert found["ok"] is False
    assert found["detail"].startswith("00000000:10:1C.0: row remapping pending (reset the GPU)")


def test_device_health_with_npu_smi_printing_a_recorded_table(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_tool_dir(tmp_path, 'npu-smi', 'npu-smi-info.a3.txt')}:{os.environ['PATH']}")
    found = health.check_device_health()
    assert found["ok"] is True and found["detail"] == "8 device(s) healthy per npu-smi"


def test_devices_against_the_allocation_and_what_nvidia_smi_sees(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_NVIDIA}:{os.environ['PATH']}")  # sees GPUs 0 and 1
    assert health.check_devices(2, {"HPCLAUNCH_DEVICES": "0,1"})["ok"] is True
    missing = health.check_devices(2, {"HPCLAUNCH_DEVICES": "0,2"})
    assert missing["ok"] is False and missing["detail"] == "nvidia-smi does not see allocated device(s) 2 (it sees 0,1)"
    short = health.check_devices(2, {"CUDA_VISIBLE_DEVICES": "0"})
    assert short["ok"] is False and "gave 1 device(s) (0), the job runs 2 rank(s) per node" in short["detail"]
    assert health.check_devices(None, {})["ok"] is None


def test_free_space_below_the_threshold_names_the_place_and_the_setting(tmp_path):
    ok = health.check_free_space({"run root": tmp_path}, 0.001)
    assert ok["ok"] is True and ok["free_gib"]["run root"] > 0
    low = health.check_free_space({"run root": tmp_path, "scratch": tmp_path / "missing"}, 1e9)
    assert low["ok"] is False
    assert f"run root {tmp_path} has " in low["detail"] and "GiB free < health.min_free_gib 1e+09" in low["detail"]
    assert "scratch" in low["detail"] and "cannot read" in low["detail"]


def _node_file(run: RunFiles, node: int, host: str, *checks: dict) -> None:
    path = run.health_node(node, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"node": node, "host": host, "ok": all(c["ok"] is not False for c in checks),
                                "checks": list(checks)}))


def _module(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.health", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=60)


def test_the_verdict_names_each_failing_node_and_check_and_ends_with_the_health_exit_code(tmp_path):
    run = RunFiles(tmp_path)
    _node_file(run, 0, "node1", {"name": "free_space", "ok": True, "detail": "free: run root 50 GiB"})
    _node_file(run, 1, "node2", {"name": "free_space", "ok": False, "detail": "run root /x has 3.0 GiB free"})
    env = {"HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_NNODES": "3", "HPCLAUNCH_RESTART": "0"}
    proc = _module("verdict", env=env)
    assert proc.returncode == health.HEALTH_EXIT_CODE
    assert "hpclaunch: error: node node2 (node 1) failed health check free_space: run root /x has 3.0 GiB free" \
        in proc.stderr
    assert "node ? (node 2) failed health check result: no health result from this node" in proc.stderr
    assert run.stop_reason.read_text().startswith("node health check failed before step 0: node node2 (node 1)")
    summary = json.loads(run.health_summary(0).read_text())
    assert summary["ok"] is False and summary["failed_hosts"] == ["node2"]
    failed = _module("--failed-nodes", "--run-dir", str(tmp_path), env={})
    assert failed.returncode == 0 and failed.stdout == "node2\n"


def test_a_passing_verdict_exits_0_and_prints_no_failed_nodes(tmp_path):
    run = RunFiles(tmp_path)
    for node in (0, 1):
        _node_file(run, node, f"node{node + 1}", {"name": "devices", "ok": None, "detail": "not asked"})
    env = {"HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_NNODES": "2"}
    proc = _module("verdict", env=env)
    assert proc.returncode == 0 and "2 node(s) passed" in proc.stdout
    assert not run.stop_reason.exists()
    assert _module("--failed-nodes", "--run-dir", str(tmp_path), env={}).stdout == "\n"


@pytest.mark.slow
def test_the_all_reduce_across_two_processes_measures_its_bandwidth():
    """Two real gloo processes (torch), as two nodes' checks run them, each reporting its link's bandwidth (more
    nodes, and one that never came: tests/unit/test_linkcheck.py)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1] - 1  # the check adds 1 to the training's port
    results: dict[int, dict] = {}

    def node(rank: int) -> None:
        env = {**os.environ, "HPCLAUNCH_NNODES": "2", "HPCLAUNCH_NODE_RANK": str(rank), "MASTER_IP": "127.0.0.1",
               "MASTER_PORT": str(port), "HPCLAUNCH_ACCELERATOR": "cpu", "HPCLAUNCH_BACKEND": "gloo"}
        results[rank] = health.check_allreduce(env, 1, 60, 0.0)

    threads = [threading.Thread(target=node, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for found in results.values():
        assert found["ok"] is True, found
        assert found["backend"] == "gloo" and found["nodes"] == 2 and found["busbw_gbps"] > 0
        assert found["detail"].startswith("1 MiB with 1 partner(s) in 1 round(s) over 2 nodes (gloo): bus bandwidth ")
    too_fast = health.check_allreduce({"HPCLAUNCH_NNODES": "1"}, 1, 60, 1e9)
    assert too_fast["ok"] is None and too_fast["detail"].startswith("one node")


def _profile(tmp_path: Path, **health_keys: object) -> Path:
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["health"] = health_keys
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("args", "expected"), [
    (("--set", "health.min_free_gib=-1"), "health.min_free_gib"),
    (("--set", "health.enabled=maybe"), "health.enabled"),
    (("--set", "health.min_allreduce_gbps=fast"), "health.min_allreduce_gbps"),
])
def test_bad_health_settings_are_clear_errors(hpclaunch, hpc_home, args, expected):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--dry-run", *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("hpclaunch: error: ") and expected in result.stderr
    assert "Traceback" not in result.output


def test_bad_profile_health_and_straggler_settings_are_clear_errors(hpclaunch, hpc_home, tmp_path):
    result = hpclaunch("submit", "allreduce", "--profile", str(_profile(tmp_path, allreduce_mib=0)), "--dry-run")
    assert result.exit_code == 2 and "health.allreduce_mib" in result.stderr, result.output
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["stragglers"] = {"factor": 0.5}
    (tmp_path / "p2.yaml").write_text(yaml.safe_dump(data))
    result = hpclaunch("submit", "allreduce", "--profile", str(tmp_path / "p2.yaml"), "--dry-run")
    assert result.exit_code == 2 and "stragglers.factor" in result.stderr, result.output


def test_the_dry_run_shows_the_health_step_with_its_settings_and_it_can_be_turned_off(hpclaunch, hpc_home, tmp_path):
    profile = str(_profile(tmp_path, min_free_gib=5, min_allreduce_gbps=0.5, scratch="/local/scratch"))
    shown = hpclaunch("submit", "allreduce", "--profile", profile, "--nodes", "2", "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert "# --- node health before step 0" in shown.output
    assert ("hpclaunch.runtime.node.health check --min-free-gib 5 --min-allreduce-gbps 0.5 --allreduce-mib 16 "
            "--timeout 120 --nodes 2 --scratch /local/scratch --expect-devices") in shown.output
    assert "hpclaunch_stamp health_checked" in shown.output
    off = hpclaunch("submit", "allreduce", "--profile", profile, "--nodes", "2", "--dry-run",
                    "--set", "health.enabled=false")
    assert off.exit_code == 0 and "node health" not in off.output and "runtime.node.health" not in off.output
    local = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run")
    assert local.exit_code == 0 and "runtime.node.health" not in local.output  # off by default on local


def test_spare_nodes_that_passed_take_the_place_of_a_failing_node(tmp_path):
    """2 nodes + 1 spare: node2 fails, node1 and node3 (the spare) passed: the launch goes on with node1,node3 (the
    job script reads them from health/launch-nodes.restart-0), exit 0, no stop_reason."""
    run = RunFiles(tmp_path)
    ok = {"name": "free_space", "ok": True, "detail": "free"}
    _node_file(run, 0, "node1", ok)
    _node_file(run, 1, "node2", {"name": "injected", "ok": False, "detail": "HPCLAUNCH_INJECT=sick:1:0"})
    _node_file(run, 2, "node3", ok)
    env = {"HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_NNODES": "2", "HPCLAUNCH_RESTART": "0",
           "HPCLAUNCH_ALLOCATION": "node1,node2,node3"}
    proc = _module("verdict", "--spares", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "warning: node node2 (node 1) failed health check injected" in proc.stderr
    assert "node2 failed; spare node(s) take their place: the launch runs on node1,node3" in proc.stdout
    assert run.health_launch_nodes(0).read_text() == "node1,node3\nnode2\n"
    assert not run.stop_reason.exists()
    assert json.loads(run.health_summary(0).read_text())["launch_nodes"] == ["node1", "node3"]


def test_too_few_healthy_nodes_end_the_job_even_with_a_spare(tmp_path):
    run = RunFiles(tmp_path)
    bad = {"name": "injected", "ok": False, "detail": "sick"}
    _node_file(run, 0, "node1", bad)
    _node_file(run, 1, "node2", bad)
    _node_file(run, 2, "node3", {"name": "free_space", "ok": True, "detail": "free"})
    env = {"HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_NNODES": "2", "HPCLAUNCH_RESTART": "0",
           "HPCLAUNCH_ALLOCATION": "node1,node2,node3"}
    proc = _module("verdict", "--spares", "1", env=env)
    assert proc.returncode == health.HEALTH_EXIT_CODE
    assert not run.health_launch_nodes(0).exists() and run.stop_reason.is_file()


def test_sick_names_a_node_of_the_allocation_and_no_rank_trips_on_it(tmp_path):
    """`sick:NODE:0` fails that node's health check; the training loop's injector never fires it."""
    from hpclaunch.config.faults import parse_list
    from hpclaunch.runtime.node.inject import Injector

    env = {"HPCLAUNCH_INJECT": "sick:1:0,kill:1:5"}
    assert health._sick(env, 1) and not health._sick(env, 0)
    injector = Injector(parse_list(env["HPCLAUNCH_INJECT"]), rank=1)
    assert [str(f) for f in injector.faults] == ["kill:1:5"]
