"""launch.agent: none: the node supervisor starts the ranks itself (hpclaunch/runtime/node/ranks.py), as real
processes on this machine: each rank's environment, stop signals passed on, a failing rank ending the node.
The dev-cluster run (same losses as torchrun, cancel) is tests/integration/test_agentless.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.errors import ConfigError
from hpclaunch.launchers import get_launcher
from hpclaunch.runtime.node.ranks import rank_env
from hpclaunch.submission.resolve import CliOverrides, resolve

ROOT = Path(__file__).resolve().parents[2]
_SUPERVISE = [sys.executable, "-m", "hpclaunch.runtime.node.supervise", "--no-watchdog", "--poll=0.2", "--grace=5"]


def _env(tmp_path: Path, node_rank: int = 0, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "MASTER_"))}
    return {**base, "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_RESTART": "0",
            "HPCLAUNCH_NODE_RANK": str(node_rank), "HPCLAUNCH_JOB_ID": f"unit{os.getpid()}",
            "HPCLAUNCH_HEAD_NODE": "node1", "MASTER_PORT": "23456", "PYTHONPATH": str(ROOT), **extra}


def test_each_rank_gets_torchruns_variables_and_no_agents():
    base = {"HPCLAUNCH_HEAD_NODE": "node1", "MASTER_ADDR": "node1", "MASTER_PORT": "23456",
            "TORCHELASTIC_RUN_ID": "stale", "PET_NNODES": "9", "PATH": "/bin"}
    env = rank_env(base, node_rank=1, nnodes=2, nproc=4, local_rank=3)
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
                                "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")} == {
        "RANK": "7", "LOCAL_RANK": "3", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
        "NODE_RANK": "1", "MASTER_ADDR": "node1", "MASTER_PORT": "23456", "OMP_NUM_THREADS": "1"}
    assert not [k for k in env if k.startswith(("TORCHELASTIC_", "PET_"))]
    assert env["PATH"] == "/bin"
    one = rank_env({"OMP_NUM_THREADS": "2"}, node_rank=0, nnodes=1, nproc=1, local_rank=0)
    assert one["OMP_NUM_THREADS"] == "2" and one["MASTER_ADDR"] == "127.0.0.1"


def test_the_supervisor_starts_one_process_per_local_rank_with_its_environment(tmp_path: Path):
    dump = ("import json, os, sys; keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'NODE_RANK', 'MASTER_ADDR'); "
            "open(sys.argv[1] + '/' + os.environ['RANK'], 'w').write(json.dumps({k: os.environ[k] for k in keys}))")
    proc = subprocess.run([*_SUPERVISE, "--ranks=2:3", "--", sys.executable, "-c", dump, str(tmp_path)],
                          env=_env(tmp_path, node_rank=1), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = {int(p.name): json.loads(p.read_text()) for p in tmp_path.iterdir() if p.name.isdigit()}
    assert sorted(seen) == [3, 4, 5]
    assert seen[5] == {"RANK": "5", "LOCAL_RANK": "2", "WORLD_SIZE": "6", "NODE_RANK": "1", "MASTER_ADDR": "node1"}


def test_a_failing_rank_stops_the_others_and_ends_the_node_with_its_code(tmp_path: Path):
    rank = ("import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.5); "
            "sys.exit(3) if r == 1 else time.sleep(300)")
    t0 = time.time()
    proc = subprocess.run([*_SUPERVISE, "--ranks=1:3", "--", sys.executable, "-c", rank],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert time.time() - t0 < 100  # the sleeping ranks were stopped, not waited for
    _assert_nothing_left()


def test_a_stop_signal_reaches_every_rank(tmp_path: Path):
    """As with torchrun (cancel, USR1 before the time limit): each rank gets the signal and leaves on its own."""
    rank = ("import os, signal, sys, time, pathlib; d = sys.argv[1]; "
            "signal.signal(signal.SIGUSR1, lambda *a: (pathlib.Path(d, 'saved-' + os.environ['RANK']).touch(), "
            "sys.exit(0))); pathlib.Path(d, 'up-' + os.environ['RANK']).touch(); time.sleep(300)")
    proc = subprocess.Popen([*_SUPERVISE, "--ranks=1:2", "--", sys.executable, "-c", rank, str(tmp_path)],
                            env=_env(tmp_path))
    deadline = time.time() + 60
    while len(list(tmp_path.glob("up-*"))) < 2 and time.time() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=60) == 0
    assert sorted(p.name for p in tmp_path.glob("saved-*")) == ["saved-0", "saved-1"]
    _assert_nothing_left()


def _assert_nothing_left() -> None:
    tag = f"HPCLAUNCH_SUPERVISOR_TAG=unit{os.getpid()}.".encode()
    alive = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            alive += [env] if tag in env.read_bytes() else []
        except OSError:
            continue
    assert not alive, f"processes left behind: {alive}"


def test_agent_none_renders_rank_exec_under_the_supervisor_and_only_for_torchrun(hpc_home, tmp_path: Path):
    for agent in ("launch.agent=none",), ("launch.agent=auto",), ():  # auto is the default
        spec = resolve("allreduce", "dev-slurm", CliOverrides(layout="2n2g", sets=agent))
        script = get_launcher("torchrun").node_script(spec, tmp_path)
        assert "--ranks=2:2 -- python -m hpclaunch.runtime.node.rank_exec " in script
        assert "torch.distributed" not in script and "runtime.train.agent" not in script
    kept = resolve("allreduce", "dev-slurm", CliOverrides(layout="2n2g", sets=("launch.agent=torchrun",)))
    assert "hpclaunch.runtime.train.agent" in get_launcher("torchrun").node_script(kept, tmp_path)
    deepspeed = resolve("allreduce_ds", "dev-slurm", CliOverrides(layout="1n2g"))  # auto: deepspeed's own launch
    assert not deepspeed.recipe.agentless
    with pytest.raises(ConfigError, match="launch.agent: none needs launcher: torchrun"):
        resolve("allreduce_ds", "dev-slurm", CliOverrides(layout="1n2g", sets=("launch.agent=none",)))
