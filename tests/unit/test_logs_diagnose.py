"""`hpclaunch logs --diagnose` on run directories written the way real jobs write them (texts copied
from real torchrun / Slurm / Hugging Face / MindSpore output)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli.main import cli
from hpclaunch.logs.diagnose import diagnose
from hpclaunch.schedulers.base import JobStatus
from tests.fixtures.jobrecords import add_local_record

GLOO_PEER = (
    "[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
    "Connection closed by peer [10.77.0.1]:59023. This is typically caused by a remote worker crashing."
)
TRACE = (
    "[rank{r}]: Traceback (most recent call last):\n"
    '[rank{r}]:   File "/run/recipe/train.py", line 37, in <module>\n'
)
ROOT_CAUSE = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
hpclaunch.runtime.node.rank_exec FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-22_07:29:44
  host      : node1
  rank      : 0 (local_rank: 0)
  exitcode  : 143 (pid: 20089)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_07:29:43
  host      : node1
  rank      : {rank} (local_rank: {rank})
  exitcode  : {code} (pid: 20090)
  error_file: <N/A>
============================================================
srun: error: node1: task 0: Exited with exit code 1
hpclaunch: launch exited with code 1
"""
NOISE = "step 12 loss 3.21 lr 0.0001 tokens/s 20000 - no Error here, UserWarning: fine\n"


def write_run(root: Path, ranks: dict[int, str], batch: str = "", restart: int = 0, noise: int = 50) -> Path:
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for i, (r, tail) in enumerate(sorted(ranks.items())):
        p = logs / f"rank-{r}.restart-{restart}.log"
        p.write_text(NOISE * noise + tail)
        os.utime(p, (time.time() - 100 + i, time.time() - 100 + i))
    (logs / "job.7.out").write_text("hpclaunch: job 7 restart 0 on node1, head node1:21084\n" + batch)
    return root


def test_one_rank_raises_others_wait(tmp_path: Path) -> None:
    run = write_run(
        tmp_path,
        {
            0: TRACE.format(r=0) + GLOO_PEER.format(r=0) + "\n",
            1: TRACE.format(r=1) + "[rank1]: ValueError: bad batch shape on rank 1\n",
            2: TRACE.format(r=2) + GLOO_PEER.format(r=2) + "\n",
        },
        batch=ROOT_CAUSE.format(rank=1, code=1),
    )
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == ("python_error", 1)
    assert d.error == "[rank1]: ValueError: bad batch shape on rank 1"
    assert d.file.endswith("rank-1.restart-0.log")
    assert d.waiting_ranks == [0, 2]
    assert d.first_failure == {"time": "2026-11-22_07:29:43", "host": "node1", "rank": "1", "exit": "1"}


def test_root_cause_picks_the_rank_even_when_it_wrote_last(tmp_path: Path) -> None:
    run = write_run(
        tmp_path,
        {0: "[rank0]: KeyError: 'a'\n", 3: "[rank3]: ZeroDivisionError: x\n"},
        batch=ROOT_CAUSE.format(rank=3, code=1),
    )
    assert diagnose(run, "7").rank == 3


@pytest.mark.parametrize(
    "text,cause",
    [
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)",
            "device_oom",
        ),
        ("RuntimeError: NPU out of memory. Tried to allocate 1.00 GiB", "device_oom"),
        ("RuntimeError: MUSA out of memory. Tried to allocate 512.00 MiB", "device_oom"),
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, "
            "message: address already in use",
            "port_in_use",
        ),
        ("OSError: [Errno 98] Address already in use", "port_in_use"),
        ("ModuleNotFoundError: No module named 'flash_attn'", "module_missing"),
        # the module is there without the name: its installed version is not the one the script was written for
        ("ImportError: cannot import name 'LlamaConfig' from 'transformers'", "package_version"),
        (
            "OSError: We couldn't connect to 'https://huggingface.co' to load the files, "
            "and couldn't find them in the cached files.",
            "asset_missing",
        ),
        (
            "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk "
            "cache and outgoing traffic has been disabled.",
            "asset_missing",
        ),
        ("hpclaunch.errors.AssetError: model gpt2 is not staged in /store", "asset_missing"),
        (
            "[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800108 milliseconds before timing out.",
            "collective_timeout",
        ),
        ("Segmentation fault (core dumped)", "segfault"),
    ],
)
def test_rank_error_kinds(tmp_path: Path, text: str, cause: str) -> None:
    run = write_run(
        tmp_path, {0: "ok\n", 1: f"[rank1]: Traceback (most recent call last):\n[rank1]: {text}\n"}
    )
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == (cause, 1)
    assert d.hint
    if cause == "collective_timeout":  # rank 1 timed out waiting; rank 0 never reported it: the suspect
        assert d.suspect_ranks == [0] and "rank(s) 0 did not report the timeout" in d.hint


def test_collective_timeout_names_the_ranks_that_did_not_time_out(tmp_path: Path) -> None:
    wd = (
        "[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 1800108 milliseconds before timing out.\n"
    )
    run = write_run(
        tmp_path, {0: wd.format(r=0), 1: wd.format(r=1), 2: "step 100 loss 2.0\n", 3: wd.format(r=3)}
    )
    d = diagnose(run, "7")
    assert d.cause == "collective_timeout" and d.rank == 0 and d.suspect_ranks == [2]
    assert (d.operation, d.seq_num) == ("ALLREDUCE", 3) and d.waiting_ranks == [1, 3]
    assert "rank(s) 2 did not report the timeout" in d.hint and "--rank 2 --tail 50" in d.hint


@pytest.mark.parametrize(
    "state,batch,cause",
    [
        (
            "TIMEOUT",
            "slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-11-22T07:40:00 DUE TO TIME LIMIT ***",
            "slurm_timeout",
        ),
        (
            None,
            "slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-11-22T07:40:00 DUE TO TIME LIMIT ***",
            "slurm_timeout",
        ),
        (
            "PREEMPTED",
            "slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-11-22T07:40:00 DUE TO PREEMPTION ***",
            "preempted",
        ),
        ("NODE_FAIL", "", "node_fail"),
        ("OUT_OF_MEMORY", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.0.", "host_oom"),
        (
            None,
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.0. Some of your processes may have "
            "been killed by the cgroup out-of-memory handler.",
            "host_oom",
        ),
    ],
)
def test_job_level_causes(tmp_path: Path, state: str | None, batch: str, cause: str) -> None:
    # the ranks show only the cascade (SIGTERM, lost peers): the Slurm cause wins
    run = write_run(
        tmp_path, {0: GLOO_PEER.format(r=0) + "\n", 1: "SignalException: got signal 15\n"}, batch=batch + "\n"
    )
    d = diagnose(run, "7", JobStatus("7", state) if state else None)
    assert d.cause == cause


def test_rank_killed_silently_by_oom_killer(tmp_path: Path) -> None:
    run = write_run(
        tmp_path,
        {0: GLOO_PEER.format(r=0) + "\n", 1: "step 3 loss 2.0\n"},
        batch=ROOT_CAUSE.format(rank=1, code=-9),
    )
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == ("host_oom", 1)


def test_without_torchruns_agent_the_first_recorded_exit_is_the_root_cause(tmp_path: Path) -> None:
    """launch.agent none/auto: no agent prints a root cause; rank_exec's exit records say which rank failed first
    (rank 1, killed by SIGKILL), not rank 0, which the node's supervisor stopped after it."""
    run = write_run(tmp_path, {0: GLOO_PEER.format(r=0) + "\n", 1: "step 3 loss 2.0\n"},
                    batch="srun: error: node2: task 1: Exited with exit code 137\n"
                          "hpclaunch: launch exited with code 137\n")
    progress = tmp_path / "progress"
    progress.mkdir()
    now = time.time()
    for rank, code, host, at in ((0, -15, "node1", now - 5), (1, -9, "node2", now - 6)):
        (progress / f"rank-{rank}.restart-0.exit").write_text(json.dumps({"rank": rank, "code": code, "host": host,
                                                                          "time": at}))
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="137:0"))
    assert (d.cause, d.rank) == ("host_oom", 1), d
    assert d.first_failure is not None and (d.first_failure["rank"], d.first_failure["host"]) == ("1", "node2")
    assert d.first_failure["exit"] == "137"  # 128 + SIGKILL, the rank's exit code as torchrun reports it


def test_rank_exited_without_a_word(tmp_path: Path) -> None:
    run = write_run(
        tmp_path,
        {0: GLOO_PEER.format(r=0) + "\n", 1: "step 3 loss 2.0\n"},
        batch=ROOT_CAUSE.format(rank=1, code=3),
    )
    d = diagnose(run, "7")
    assert (d.cause, d.rank) == ("exited", 1)
    assert "rank 1 exited with code 3" in d.title


def test_latest_restart_is_diagnosed(tmp_path: Path) -> None:
    write_run(tmp_path, {0: "[rank0]: ValueError: old failure\n"}, restart=0)
    write_run(tmp_path, {0: "[rank0]: KeyError: 'new failure'\n"}, restart=1)
    d = diagnose(tmp_path, "7")
    assert d.restart == 1 and d.restarts == [0, 1] and "new failure" in d.error


def test_msrun_worker_logs(tmp_path: Path) -> None:
    d0 = tmp_path / "logs" / "msrun" / "node0.restart-0"
    d0.mkdir(parents=True)
    (d0 / "worker_0.log").write_text("[WARNING] ok\n")
    (d0 / "worker_1.log").write_text(
        "[ERROR] HCCL ... \nRuntimeError: Call aclnnAdd failed, detail:EL0004: "
        "[PID: 1] Failed to allocate memory.\n"
    )
    (d0 / "scheduler.log").write_text("")
    d = diagnose(tmp_path, "7")
    assert (d.cause, d.rank) == ("device_oom", 1)


def test_completed_job_has_no_cause(tmp_path: Path) -> None:
    run = write_run(tmp_path, {0: "done\n", 1: "done\n"})
    assert diagnose(run, "7", JobStatus("7", "COMPLETED", exit_code="0:0")).cause is None


def test_big_logs_read_only_their_ends(tmp_path: Path) -> None:
    # the error sits after 5 MB of output; an old, handled error early in the file is not in the window
    run = write_run(tmp_path, {0: "ok\n", 1: "[rank1]: RuntimeError: real one\n"}, noise=1)
    p = run / "logs" / "rank-1.restart-0.log"
    body = "ValueError: long ago\n" + NOISE * 70_000 + p.read_text()
    p.write_text(body)
    d = diagnose(run, "7")
    assert d.error == "[rank1]: RuntimeError: real one"


def test_cli_diagnose_json_and_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path / "home"))
    run = write_run(
        tmp_path / "run",
        {0: GLOO_PEER.format(r=0) + "\n", 1: "[rank1]: ValueError: bad batch shape on rank 1\n"},
        batch=ROOT_CAUSE.format(rank=1, code=1),
    )
    add_local_record("local-7", run)
    res = CliRunner().invoke(cli, ["logs", "local-7", "--diagnose", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["rank"] == 1 and data["cause"] == "python_error"
    res = CliRunner().invoke(cli, ["logs", "local-7", "--diagnose"], catch_exceptions=False)
    assert "on rank 1" in res.output and "error: [rank1]: ValueError" in res.output and "hint:" in res.output


def test_batch_output_of_an_earlier_run_is_not_blamed(tmp_path: Path) -> None:
    # run 0 was preempted and requeued; run 1 fails on rank 0: the preemption is history
    write_run(tmp_path, {0: "[rank0]: KeyError: 'x'\n"}, restart=1,
              batch="slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026 DUE TO PREEMPTION ***\n"
                    "hpclaunch: job 7 restart 1 on node2, head node2:21084\n")
    d = diagnose(tmp_path, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == ("python_error", 0)


def test_hints_name_the_job_and_rank(tmp_path: Path) -> None:
    run = write_run(tmp_path, {0: GLOO_PEER.format(r=0) + "\n", 1: "step 3\n"},
                    batch=ROOT_CAUSE.format(rank=1, code=3))
    assert "hpclaunch logs 7 --rank 1 --tail 50" in diagnose(run, "7").hint
