"""How the diagnosis weighs its evidence and what it says besides the cause (issue 33, parts 3-5): the confidence
and the other candidates, "unknown" with the suspicious lines when no rule knows the failure, an exception quoted
as it is, the evidence ranked by specificity, time and the taxonomy, the node of the failing rank, hints made
concrete from the lines, the recoveries of a job that completed, and `--restart N`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch.cli.main import cli
from hpclaunch.errors import NotFoundError
from hpclaunch.logs.diagnose import diagnose, scan_bytes
from hpclaunch.schedulers.base import JobStatus
from tests.fixtures.jobrecords import add_local_record

FAILED = JobStatus("7", "FAILED", exit_code="1:0")
HEAD = "hpclaunch: job 7 restart {n} on node1,node2, head node1:21084\n"
TRACE = "Traceback (most recent call last):\n  File \"/run/train.py\", line 37, in <module>\n    main()\n"


def run_dir(root: Path, ranks: dict[int, str], batch: str = "", restart: int = 0, ages: dict[int, float] | None = None
            ) -> Path:
    """A run directory: rank logs of one restart (each written `ages[r]` seconds ago) and the job output."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for r, text in ranks.items():
        p = logs / f"rank-{r}.restart-{restart}.log"
        p.write_text("step 1 loss 3.0\n" * 20 + text)
        t = time.time() - (ages or {}).get(r, 100 - r)
        os.utime(p, (t, t))
    out = logs / "job.7.out"
    out.write_text((out.read_text() if out.exists() else "") + HEAD.format(n=restart) + batch)
    return root


def test_a_specific_cause_has_a_high_confidence_and_names_the_others(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: "[rank0]: RuntimeError: Connection closed by peer\n",
                             1: TRACE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                                        "has a total capacity of 79.1 GiB of which 1.2 GiB is free.\n",
                             2: "[rank2]: ValueError: unrelated\n"})
    d = diagnose(run, "7", FAILED)
    assert (d.cause, d.rank, d.layer) == ("device_oom", 1, "resources")
    assert d.confidence == 0.9
    assert "it tried to allocate 2.00 GiB with 1.2 GiB free of 79.1 GiB" in d.hint
    # the others' causes first, then the cascade of a rank that had none of its own
    assert [(c["class"], c["rank"]) for c in d.candidates] == [("python_error", 2), ("peer_failed", 0)]
    assert set(d.candidates[0]) >= {"class", "line", "file", "rank"}


def test_two_specific_causes_lower_the_confidence(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: "OSError: [Errno 28] No space left on device: '/scratch/u/ckpt'\n",
                             1: "ModuleNotFoundError: No module named 'einops'\n"}, ages={0: 50, 1: 50})
    d = diagnose(run, "7", FAILED)
    # the same moment: the lower layer (resources) explains more than the higher (software)
    assert d.cause == "no_space" and d.confidence < 0.9
    assert [c["class"] for c in d.candidates] == ["module_missing"]


def test_the_earlier_rank_wins_over_the_lower_layer(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: "OSError: [Errno 28] No space left on device\n",
                             1: "ModuleNotFoundError: No module named 'einops'\n"}, ages={0: 20, 1: 80})
    assert diagnose(run, "7", FAILED).cause == "module_missing"


def test_a_specific_cause_in_the_job_output_beats_a_ranks_generic_exception(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: TRACE + "OSError: [Errno 5] Input/output error\n"},
                  batch="LustreError: 11-0: scratch-OST0003-osc: operation ost_write to node 10.0.0.3@o2ib failed: "
                        "rc = -107\n")
    d = diagnose(run, "7", FAILED)
    assert d.cause == "lustre_error"


def test_an_unknown_exception_is_quoted_with_its_type_and_message(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: "step 9\n", 1: TRACE + "omegaconf.errors.ConfigKeyError: Key 'lr' is not in struct\n"})
    d = diagnose(run, "7", FAILED)
    assert (d.cause, d.rank) == ("python_error", 1)
    assert d.title == "the script raised omegaconf.errors.ConfigKeyError: Key 'lr' is not in struct"
    assert d.confidence == 0.6 and "without an error message" not in d.title


def test_nothing_known_is_unknown_and_quotes_the_suspicious_lines(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: "step 3\nthe frobnicator failed: state 0x3\nbye\n",
                             1: "step 3\n"},
                  batch="launcher: rank 0 returned status 3 (abnormal)\n")
    d = diagnose(run, "7", FAILED)
    assert d.cause == "unknown" and d.title.startswith("unknown:") and d.confidence == 0.0
    assert d.rank is None and d.error is None  # nothing is guessed
    assert any("frobnicator failed" in s["line"] and s["file"].endswith("rank-0.restart-0.log") for s in d.suspicious)
    assert any("abnormal" in s["line"] for s in d.suspicious) is False  # not an error's words
    assert "no cause is guessed" in d.hint


def test_the_node_of_the_failing_rank_from_its_progress_record(tmp_path: Path) -> None:
    run = run_dir(tmp_path, {0: "step 3\n", 1: "ModuleNotFoundError: No module named 'einops'\n"})
    (run / "progress").mkdir()
    (run / "progress" / "rank-1.restart-0.json").write_text(json.dumps(
        {"rank": 1, "step": 3, "phase": "train", "t": 1.0, "host": "gpu-node-17"}))
    d = diagnose(run, "7", FAILED)
    assert (d.rank, d.node) == (1, "gpu-node-17")
    assert d.title == "a Python module is missing: einops" and "pip install einops" in d.hint


def test_no_space_says_where_and_how_much_is_free(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = run_dir(tmp_path / "run", {0: f"OSError: [Errno 28] No space left on device: '{scratch}/ckpt.pt'\n"})
    d = diagnose(run, "7", FAILED)
    assert d.cause == "no_space" and str(scratch / "ckpt.pt") in d.title
    assert "GiB free of" in d.hint and "run_root" in d.hint
    remote = diagnose(run, "7", FAILED, local=False)  # a copy of a remote run's logs: nothing measured here
    assert "GiB free" not in remote.hint


@pytest.mark.parametrize("line,words", [
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
     ("CUDA 11.4", "module load cuda/11.4", "cu114")),
    ("NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation.",
     ("sm_90", "CUDA >= 11.8")),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
     ("libcudart.so.12", "nvidia-cuda-runtime-cu12")),
    ("include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm (size 9637888)",
     ("9.2 MiB segment", "num_workers", "--shm-size")),
    ("slurmstepd: error: Job 42 exceeded memory limit (10485760 > 8388608), being killed",
     ("10.0 GiB of its 8.0 GiB limit", "mem_per_device")),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available",
     ("Slurm said: Requested node configuration is not available", "sinfo")),
    ("ImportError: /lib64/libc.so.6: version `GLIBC_2.28' not found (required by /x/_C.so)",
     ("GLIBC_2.28 not found (needed by /x/_C.so)", "ldd --version")),
])
def test_hints_are_concrete(tmp_path: Path, line: str, words: tuple[str, ...]) -> None:
    d = diagnose(run_dir(tmp_path, {0: line + "\n"}), "7", FAILED)
    said = f"{d.title} {d.hint}"
    for word in words:
        assert word in said, (word, said)


def test_every_class_hint_says_what_to_do() -> None:
    from hpclaunch.logs.rules import RULES

    for rule in RULES:
        if rule.primary:  # a cause: its hint names a command, a setting or a place to look
            assert any(w in rule.hint for w in ("--set", "`", "profile", "hpclaunch", "module", "pip", "=",
                                                "python.stage")), rule.name


def _recovered(root: Path) -> Path:
    """A job that recovered twice inside its allocation: a node lost in restart 0, a device fault in restart 1,
    and completed in restart 2."""
    run_dir(root, {0: "step 8\n", 1: "step 8\n"}, restart=0)
    run_dir(root, {0: "step 12\n", 1: "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"},
            restart=1, batch="srun: error: node2: task 1: Exited with exit code 1\n")
    run_dir(root, {0: "step 20\n", 1: "step 20\n"}, restart=2)
    recs = [{"job": "7", "cause": "node_lost", "rank": 0, "node": "node1", "reason": "node node1 lost: every process "
             "on it ended at once (its supervisor too)", "restart": 0, "resumed_restart": 1, "detected_at": 100.0,
             "resumed_step": 8, "nodes": "node2,node3", "dropped": "node1"},
            {"job": "7", "cause": "device_fault", "rank": 1, "node": "node2", "reason": "a device or driver fault on "
             "node2 (rank 1)", "restart": 1, "resumed_restart": 2, "detected_at": 200.0, "resumed_step": 12,
             "nodes": "node3,node4", "dropped": "node1,node2"}]
    (root / "recoveries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (root / "timeline.jsonl").write_text("".join(json.dumps({"phase": "first_step", "restart": n, "job": "7", "t": t})
                                                 + "\n" for n, t in ((1, 109.4), (2, 204.6))))
    return root


def test_a_completed_job_tells_each_recovery(tmp_path: Path) -> None:
    d = diagnose(_recovered(tmp_path), "7", JobStatus("7", "COMPLETED", exit_code="0:0"))
    assert d.cause is None and d.title == "the job completed after 2 recoveries inside its allocation"
    assert [(r["restart"], r["cause"], r["rank"], r["node"], r["step"], r["seconds_to_next_step"])
            for r in d.recoveries] == [(0, "node_lost", 0, "node1", 8, 9.4), (1, "device_fault", 1, "node2", 12, 4.6)]
    assert d.recoveries[0]["summary"] == ("restart 0: node_lost: rank 0 on node1, resumed from step 8 on "
                                          "node2,node3, next step 9.4 s after")
    assert "--restart N" in d.hint


def test_restart_n_shows_that_restarts_evidence(tmp_path: Path) -> None:
    run = _recovered(tmp_path)
    one = diagnose(run, "7", JobStatus("7", "COMPLETED", exit_code="0:0"), restart=1)
    assert (one.restart, one.state, one.cause, one.rank) == (1, None, "device_fault", 1)
    assert one.node == "node2" and one.file.endswith("rank-1.restart-1.log")
    zero = diagnose(run, "7", JobStatus("7", "COMPLETED", exit_code="0:0"), restart=0)
    assert (zero.cause, zero.rank, zero.node) == ("node_lost", 0, "node1")  # the lost node's logs say nothing
    assert "node node1 lost" in zero.title and "from step 8" in zero.hint
    with pytest.raises(NotFoundError):
        diagnose(run, "7", restart=5)


def test_cli_diagnose_restart_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path / "home"))
    run = _recovered(tmp_path / "run")
    add_local_record("local-7", run)
    res = CliRunner().invoke(cli, ["logs", "local-7", "--diagnose", "--restart", "1", "--json"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert (data["restart"], data["cause"], data["rank"]) == (1, "device_fault", 1)
    assert isinstance(data["confidence"], float) and isinstance(data["candidates"], list)
    assert len(data["recoveries"]) == 2
    text = CliRunner().invoke(cli, ["logs", "local-7", "--diagnose", "--restart", "1"], catch_exceptions=False).output
    assert "restart 1 of 3" in text and "cause: a device or driver fault on rank 1 (hardware; confidence" in text
    assert "recovered: restart 0: node_lost: rank 0 on node1" in text


@pytest.mark.parametrize("prefix", ["[rank3]: ", "[1,3]<stderr>:", "worker-3: ", "3: ", "2025-02-18 12:54:01 ",
                                    "(RayWorkerWrapper pid=4009) "])
def test_a_traceback_behind_a_launchers_prefix(prefix: str) -> None:
    lines = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>', "    main()",
             "KeyError: 'RANK'"]
    hits = scan_bytes("".join(prefix + line + "\n" for line in lines).encode(), 0, "x")
    assert [h.rule for h in hits] == ["python_error"] and hits[0].line.endswith("KeyError: 'RANK'")
