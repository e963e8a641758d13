"""`diagnose` on failure output recorded from public issue trackers (tests/fixtures/failures, SOURCES.md
there says where each file comes from). Each fixture is put where a real job writes it (a rank's log, an
msrun worker's log, or the job output) and must give the right cause, rank, node and hint."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hpclaunch.logs.diagnose import diagnose
from hpclaunch.schedulers.base import JobStatus
from tests.unit.test_logs_diagnose import ROOT_CAUSE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
HEAD = "hpclaunch: job 7 restart 0 on node1, head node1:21084\n"
NOISE = "step 12 loss 3.21 lr 0.0001 tokens/s 20000\n"

# file, where, cause, rank, words the title/hint/node must hold. where: job (the job output), rank:R (rank R's
# log; ranks 0-3 exist, the others wrote earlier: they hang, a timeout's suspect), only:R (rank R's is the only
# rank log: a collective timeout is the only evidence), msrun:R (msrun worker R's log)
TABLE: list[tuple[str, str, str, int | None, tuple[str, ...]]] = [
    ("nccl_watchdog/old_format_ofa271.log", "job", "collective_timeout", 1,
     ("ALLREDUCE", "SeqNum=469508", "1800 s")),
    ("nccl_watchdog/old_format_pytorch118369.log", "job", "collective_timeout", 0, ("ALLREDUCE", "1800 s")),
    ("nccl_watchdog/new_format_basicsr737.log", "job", "collective_timeout", 1, ("ALLREDUCE", "600 s")),
    ("nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log", "only:0", "collective_timeout", 0,
     ("_REDUCE_SCATTER_BASE", "SeqNum=7753", "600 s")),
    ("nccl_watchdog/watchdog_terminate_allgather_sglang1693.log", "job", "collective_timeout", 5,
     ("_ALLGATHER_BASE", "600 s")),
    ("nccl_watchdog/ray_worker_gather_vllm6042.log", "job", "collective_timeout", 1, ("GATHER", "600 s")),
    ("nccl_watchdog/timeout_at_nccl_work_llamafactory7396.log", "rank:0", "collective_timeout", 0,
     ("SeqNum=1580", "rank(s) 1, 2, 3 did not report")),
    ("nccl_watchdog/some_operations_failed_only_openr1mm20.log", "rank:2", "collective_timeout", 2,
     ("collective operation",)),
    ("nccl_watchdog/watchdog_stuck_heartbeat_llamafactory8549.log", "rank:2", "collective_timeout", 2,
     ("watchdog got stuck for 480 s",)),
    ("nccl_watchdog/failure_detected_at_sequence_id_arctic219.log", "job", "collective_timeout", 5,
     ("SeqNum=120049",)),
    ("nccl_watchdog/blocking_wait_diffusers12422.log", "only:1", "collective_timeout", 1,
     ("ALLREDUCE", "SeqNum=2521", "600 s")),
    ("nccl_watchdog/srun_label_terminated_weathergenerator360.log", "job", "collective_timeout", 11,
     ("ALLREDUCE", "SeqNum=52", "240 s")),
    ("nccl_watchdog/watchdog_thread_terminated_abort_picotron6.log", "rank:2", "collective_timeout", 2,
     ("ALLREDUCE", "SeqNum=1", "120 s")),
    ("nccl_error/remote_process_exited_nccl2076.log", "rank:1", "peer_failed", 0, ("went away first",)),
    ("nccl_error/unhandled_system_error_pytorch131781.log", "only:9", "collective_error", 9,
     ("Last error:", "NCCL_SOCKET_IFNAME")),
    ("nccl_error/internal_error_vllm10453.log", "rank:1", "collective_error", 1, ("NCCL_DEBUG=WARN",)),
    ("nccl_network/ib_completion_status12_nccl1405.log", "job", "network_fault", None,
     ("--exclude kp-ddp-worker-0",)),
    ("nccl_network/ib_completion_error4_nccltests252.log", "job", "network_fault", None, ("--exclude kolyoz2",)),
    ("nccl_network/socket_closed_then_cuda_oom_nccl1235.log", "job", "device_oom", None,
     ("micro_batch_size", "ng30903")),
    ("nccl_network/socket_broken_pipe_nccl795.log", "job", "peer_failed", None,
     ("went away first", "a100-st-p4d24xlarge-22")),
    ("rendezvous/tcpstore_client_timeout_cppo6.log", "job", "rendezvous_failed", None,
     ("head node", "SOCKET_IFNAME")),
    ("rendezvous/dynamic_rendezvous_cosmos681.log", "rank:1", "rendezvous_failed", 1, ("MASTER_ADDR",)),
    ("rendezvous/nccl_unique_id_store_timeout_llamafactory3698.log", "job", "rendezvous_failed", 4,
     ("head node",)),
    ("rendezvous/socket_ifname_not_found_nccl1837.log", "job", "network_interface", None,
     ("NCCL_SOCKET_IFNAME", "ip -br addr")),
    ("rendezvous/tcpstore_connect_reset_vllm_swift9.log", "job", "rendezvous_failed", None, ("MASTER_ADDR",)),
    ("rendezvous/diststore_workers_not_joined_pytorch111805.log", "rank:0", "rendezvous_failed", 0, ("head node",)),
    ("host_oom/deepspeed_return_code_minus9_ds3232.log", "job", "host_oom", None, ("host memory",)),
    ("host_oom/torchrun_failed_exitcode_minus9_colossalai3514.log", "job", "host_oom", None, ("host memory",)),
    ("host_oom/torchrun_root_cause_sigkill_cppo6.log", "job", "host_oom", 0,
     ("host memory", "mlxlab115rp2n7682d40d9")),
    ("host_oom/slurm_oom_kill_step_brainscore950.log", "job", "host_oom", None, ("host memory", "node107")),
    ("host_oom/slurm_oom_kill_new_wording_snakemake371.log", "job", "host_oom", None, ("host memory",)),
    ("device_oom/cuda_oom_pytorch16417.log", "rank:2", "device_oom", 2, ("micro_batch_size",)),
    ("device_oom/npu_oom_touchnet100.log", "rank:3", "device_oom", 3, ("micro_batch_size",)),
    ("device_oom/npu_oom_torch_oom_error_sglang29838.log", "rank:0", "device_oom", 0, ("micro_batch_size",)),
    ("device_oom/ascend_el0004_helios62.log", "job", "device_oom", None, ("micro_batch_size",)),
    ("device_oom/mindspore_total_mem_size_mindact1761.log", "msrun:3", "device_oom", 3, ("micro_batch_size",)),
    ("hccl/ei0006_hcclallreduce_vllm_ascend486.log", "only:1", "collective_timeout", 1, ("HcclAllreduce",)),
    ("hccl/ei0006_old_format_llamafactory5071.log", "msrun:2", "collective_timeout", 2,
     ("collective operation", "rank(s) 0, 1, 3 did not report")),
    ("hccl/ei0002_notify_wait_timeout_lmdeploy3354.log", "job", "collective_timeout", 6, ("Broadcast",)),
    ("hccl/ej0001_hccp_init_llamafactory3839.log", "rank:3", "collective_error", 3, ("EJ0001", "npu-smi")),
    ("hccl/ei0006_new_format_vllm_ascend5461.log", "job", "collective_timeout", None, ("collective operation",)),
    ("hccl/ei9999_hccl_task_timeout_ascend_pytorch54.log", "only:3", "collective_timeout", 3, ("1800 s",)),
    ("hccl/hccl_listen_port_in_use_vllm_ascend1955.log", "job", "port_in_use", None, ("ss -ltnp",)),
    ("msrun/worker_exit_with_exception_mindact1893.log", "job", "msrun_worker_failed", None, ("worker_<R>.log",)),
    ("musa/mtgpu_guilty_lockup_torch_musa75.log", "rank:0", "device_fault", 0, ("--exclude", "dmesg")),
    ("musa/libmccl_missing_torch_musa102.log", "rank:0", "shared_library_missing", 0,
     ("libmccl.so.2", "module spider mccl")),
    ("musa/musa_illegal_memory_access_torch_musa105.log", "rank:1", "device_fault", 1, ("MUSA_LAUNCH_BLOCKING",)),
    ("device_fault/watchdog_cuda_illegal_access_vllm20170.log", "job", "device_fault", 2,
     ("CUDA_LAUNCH_BLOCKING",)),
    ("device_fault/xid79_fallen_off_bus_nvsentinel155.log", "job", "device_fault", None, ("Xid",)),
    ("device_fault/xid79_line_nvsentinel155.log", "rank:0", "device_fault", 0, ("--exclude",)),
    ("container/pyxis_entrypoint_missing_pyxis61.log", "job", "container_failed", None,
     ("container image", "hpc-pg0-2")),
    ("container/pyxis_import_permission_pyxis62.log", "job", "container_failed", None, ("ENROOT_RUNTIME_PATH",)),
    ("container/pyxis_run_enroot_permission_pyxis12.log", "job", "container_failed", None, ("writable",)),
    ("container/singularity_no_loop_device_souporcell201.log", "job", "container_failed", None, ("APPTAINER",)),
    ("container/apptainer_resolv_conf_pggb373.log", "job", "container_failed", None, ("container image",)),
    ("container/enroot_hook_nvidia_enroot238.log", "job", "container_failed", None, ("container image",)),
    ("slurm/time_limit_zetta671.log", "job", "slurm_timeout", None, ("--set time=",)),
    ("slurm/step_time_limit_desitarget628.log", "job", "slurm_timeout", None, ("--set time=",)),
    ("slurm/cancelled_by_user_spank_plugins17.log", "job", "cancelled", None, ("nothing failed",)),
    ("launch/execve_torchrun_missing_cscfi1.log", "job", "command_not_found", None, ("python env", "g1301")),
    ("launch/slurm_script_command_not_found_jetstream18.log", "job", "command_not_found", None, ("modules",)),
    ("launch/venv_activate_missing_sz128_5.log", "job", "command_not_found", None, ("python env",)),
    ("launch/srun_not_found_snakemake91.log", "job", "command_not_found", None, ("python env",)),
]


def place(root: Path, where: str, text: str, ranks: int = 4) -> Path:
    """A run directory where `where` holds the fixture and every other rank only trained (and wrote earlier)."""
    logs = root / "logs"
    logs.mkdir(parents=True)
    kind, _, num = where.partition(":")
    target = int(num) if num else -1
    for r in ([target] if kind == "only" else range(ranks)):
        if kind == "msrun":
            p = logs / "msrun" / "node0.restart-0" / f"worker_{r}.log"
            p.parent.mkdir(parents=True, exist_ok=True)
        else:
            p = logs / f"rank-{r}.restart-0.log"
        p.write_text(NOISE * 20 + (text if r == target else ""))
        stamp = time.time() - (50 if r == target else 100)
        os.utime(p, (stamp, stamp))
    (logs / "job.7.out").write_text(HEAD + (text if kind == "job" else ""))
    return root


@pytest.mark.parametrize("name,where,cause,rank,words", TABLE, ids=[row[0] for row in TABLE])
def test_recorded_failure(tmp_path: Path, name: str, where: str, cause: str, rank: int | None,
                          words: tuple[str, ...]) -> None:
    run = place(tmp_path, where, (FIXTURES / name).read_text())
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == (cause, rank), d
    said = " ".join(filter(None, (d.title, d.hint, d.node, d.error)))
    for word in words:
        assert word in said, (word, said)


def test_every_fixture_is_in_the_table() -> None:
    # the files recorded with the rules are asserted here; the corpus added later (issue 33) is measured by
    # benchmarks/diagnose_accuracy.py, and tests/unit/test_failure_corpus.py checks that every file is in split.json
    entries = json.loads((FIXTURES / "split.json").read_text())["files"]
    files = {name for name, entry in entries.items() if entry["origin"] == "earlier"}
    assert files == {row[0] for row in TABLE}
    sources = (FIXTURES / "SOURCES.md").read_text()
    assert all(f"`{f}`" in sources for f in files), sorted(f for f in files if f"`{f}`" not in sources)


def test_watchdog_fields(tmp_path: Path) -> None:
    run = place(tmp_path, "job", (FIXTURES / "nccl_watchdog/new_format_basicsr737.log").read_text())
    d = diagnose(run, "7")
    assert (d.operation, d.timeout_ms) == ("ALLREDUCE", 600000)


def test_network_fault_names_the_node(tmp_path: Path) -> None:
    run = place(tmp_path, "job", (FIXTURES / "nccl_network/ib_completion_status12_nccl1405.log").read_text())
    assert diagnose(run, "7").node == "kp-ddp-worker-0"


def test_a_primary_cause_beats_the_watchdog_cascade(tmp_path: Path) -> None:
    # rank 2 ran out of device memory; ranks 0, 1 and 3 then timed out in the allreduce it never joined
    watchdog = (FIXTURES / "nccl_watchdog/old_format_ofa271.log").read_text()
    run = place(tmp_path, "rank:2", (FIXTURES / "device_oom/cuda_oom_pytorch16417.log").read_text())
    for r in (0, 1, 3):
        (run / "logs" / f"rank-{r}.restart-0.log").write_text(NOISE + watchdog)
    assert (diagnose(run, "7").cause, diagnose(run, "7").rank) == ("device_oom", 2)


@pytest.mark.parametrize("where", ["rank:1", "job"])
def test_hpclaunch_own_error_is_the_cause(tmp_path: Path, where: str) -> None:
    line = "hpclaunch: error: no job config: pass --config RUN_DIR/resolved.yaml or set HPCLAUNCH_CONFIG\n"
    d = diagnose(place(tmp_path, where, line), "7", JobStatus("7", "FAILED", exit_code="2:0"))
    assert d.cause == "hpclaunch_error" and d.error == line.strip()
    assert d.rank == (1 if where == "rank:1" else None)


@pytest.mark.parametrize("state", ["CANCELLED", "CANCELLED by 1000"])
def test_cancelled_state_is_not_a_failure(tmp_path: Path, state: str) -> None:
    run = place(tmp_path, "rank:0", "[rank0]: torch.distributed.elastic.multiprocessing.api.SignalException: "
                                    "Process 4242 got signal: 15\n")
    assert diagnose(run, "7", JobStatus("7", state, exit_code="0:15")).cause == "cancelled"


def test_launcher_exit_127(tmp_path: Path) -> None:
    text = "bash: line 1: python: command not found\nhpclaunch: launch exited with code 127\n"
    d = diagnose(place(tmp_path, "job", text), "7", JobStatus("7", "FAILED", exit_code="127:0"))
    assert d.cause == "command_not_found" and "python env" in d.hint


# torchrun's own summary as torch 2.x prints it in the job output (its table as test_logs_diagnose.ROOT_CAUSE
# keeps it; tests/integration/test_diagnose_torchrun.py gets the real one): the root-cause rank, an exit code only
FAILED_LINE = ("E1125 04:03:59.538000 1405 torch/distributed/elastic/multiprocessing/api.py:1002] failed "
               "(exitcode: {code}) local_rank: {rank} (pid: 1417) of binary: /work/main/.venv/bin/python\n")


def torchrun_summary(rank: int, code: str) -> str:
    """torchrun's lines for a root-cause `rank` that ended with `code`, with its traceback line (a signal's name)."""
    table = ROOT_CAUSE.format(rank=rank, code=code)
    at = table.rindex("  error_file: <N/A>\n") + len("  error_file: <N/A>\n")
    return FAILED_LINE.format(code=code, rank=rank) + table[:at] + f"  traceback : {TRACEBACKS[code]}\n" + table[at:]


TRACEBACKS = {"1": "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
              "134": "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
              "-6": "Signal 6 (SIGABRT) received by PID 1417"}

# file, the rank whose own log it is, cause, operation, sequence number, timeout (ms)
OWN_EVIDENCE = [
    ("nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log", 0, "collective_timeout",
     "_REDUCE_SCATTER_BASE", 7753, 600000),
    ("nccl_watchdog/timeout_at_nccl_work_llamafactory7396.log", 0, "collective_timeout", None, 1580, None),
    ("nccl_watchdog/blocking_wait_diffusers12422.log", 1, "collective_timeout", "ALLREDUCE", 2521, 600000),
    ("nccl_watchdog/watchdog_thread_terminated_abort_picotron6.log", 2, "collective_timeout", "ALLREDUCE", 1, 120000),
    ("hccl/ei0006_hcclallreduce_vllm_ascend486.log", 1, "collective_timeout", "HcclAllreduce", None, None),
    ("hccl/ei0002_notify_wait_timeout_lmdeploy3354.log", 3, "collective_timeout", "Broadcast", None, None),
    ("nccl_error/remote_process_exited_nccl2076.log", 1, "peer_failed", None, None, None),
]


@pytest.mark.parametrize("code", sorted(TRACEBACKS))
@pytest.mark.parametrize("name,rank,cause,op,seq,timeout", OWN_EVIDENCE, ids=[row[0] for row in OWN_EVIDENCE])
def test_own_lines_beat_the_launchers_summary(tmp_path: Path, name: str, rank: int, cause: str, op: str | None,
                                              seq: int | None, timeout: int | None, code: str) -> None:
    """torchrun names the rank and an exit code (1, 134 = SIGABRT through the rank wrapper, -6): the rank's own
    lines say why, not "exited without an error message" nor "a process crashed" (the SIGABRT)."""
    run = place(tmp_path, f"rank:{rank}", (FIXTURES / name).read_text())
    (run / "logs" / "job.7.out").write_text(HEAD + torchrun_summary(rank, code))
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank, d.operation, d.seq_num, d.timeout_ms) == (cause, rank, op, seq, timeout), d
    assert d.first_failure and d.first_failure["rank"] == str(rank) and d.file.endswith(f"rank-{rank}.restart-0.log")
    if cause == "collective_timeout":
        assert d.suspect_ranks == [r for r in range(4) if r != rank]
        assert f"--rank {d.suspect_ranks[0]} --tail 50" in d.hint


def test_a_cause_on_another_rank_beats_the_root_ranks_timeout(tmp_path: Path) -> None:
    # torchrun saw rank 0 fail first (its watchdog fired), but rank 2 had run out of memory before
    run = place(tmp_path, "rank:2", (FIXTURES / "device_oom/cuda_oom_pytorch16417.log").read_text())
    (run / "logs" / "rank-0.restart-0.log").write_text(
        NOISE + (FIXTURES / "nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log").read_text())
    (run / "logs" / "job.7.out").write_text(HEAD + torchrun_summary(0, "-6"))
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == ("device_oom", 2)


def test_a_silent_root_rank_is_still_named(tmp_path: Path) -> None:
    # the root-cause rank printed nothing; another rank's timeout does not make it the cause
    run = place(tmp_path, "rank:0", (FIXTURES / "nccl_watchdog/blocking_wait_diffusers12422.log").read_text())
    (run / "logs" / "job.7.out").write_text(HEAD + torchrun_summary(3, "1"))
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank) == ("exited", 3) and "rank 3 exited with code 1" in d.title


def test_deepspeeds_launcher_summary_gives_way_to_the_ranks_timeout(tmp_path: Path) -> None:
    # DeepSpeed's own launcher prints no Root Cause table, only "exits with return code = N" (the recorded line,
    # its code changed from -9 to 1: a rank that failed on its own, not the OOM killer's SIGKILL)
    ds = (FIXTURES / "host_oom/deepspeed_return_code_minus9_ds3232.log").read_text().replace("= -9", "= 1")
    watchdog = (FIXTURES / "nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log").read_text()
    run = place(tmp_path, "rank:0", watchdog)
    (run / "logs" / "job.7.out").write_text(HEAD + ds)
    d = diagnose(run, "7", JobStatus("7", "FAILED", exit_code="1:0"))
    assert (d.cause, d.rank, d.seq_num, d.suspect_ranks) == ("collective_timeout", 0, 7753, [1, 2, 3]), d
