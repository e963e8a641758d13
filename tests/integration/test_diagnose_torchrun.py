"""`hpclaunch logs --diagnose` inside real jobs (local profile): ranks print failure output recorded from a real
cluster (tests/fixtures/failures, SOURCES.md says where each came from) and exit 1 or abort (SIGABRT, as torch's
NCCL watchdog does), so the launcher's real summary (torchrun's ChildFailedError "Root Cause ... exitcode", msrun's
worker wrapper) surrounds it.

- JOBS: one rank prints, the other waits: the diagnosis must name the rank's own evidence, not "exited without an
  error message".
- CLASSES: every class of the corpus (and of the rules that have no recorded file yet, from their own examples) is
  printed by one rank of a real job: eight ranks a job, each with another class, under torchrun, the DeepSpeed
  launcher or msrun as the excerpt came from (msrun where MindSpore's venv is installed, else torchrun). Each rank's
  own evidence (the cause, or a candidate from its log) must be its class.

12 jobs in all, ~31 CPU s (the jobs' processes included) and ~24 s wall on a 2-core machine (docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
MSRUN = Path("/opt/hpclaunch-venvs/mindspore/bin/msrun")
RANKS_PER_JOB = 8

# recorded file, rank that prints it, end (exit 1 or abort), expected: cause, operation, seq_num, timeout_ms
JOBS = {
    "nccl_watchdog": ("nccl_watchdog/new_format_reduce_scatter_llamafactory6269.log", 0, "abort",
                      ("collective_timeout", "_REDUCE_SCATTER_BASE", 7753, 600000)),
    "hccl_ei0006": ("hccl/ei0006_hcclallreduce_vllm_ascend486.log", 1, "exit",
                    ("collective_timeout", "HcclAllreduce", None, None)),
    "nccl_internal": ("nccl_error/internal_error_vllm10453.log", 1, "exit", ("collective_error", None, None, None)),
    "xid": ("device_fault/xid79_line_nvsentinel155.log", 0, "exit", ("device_fault", None, None, None)),
}


def cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "HPCLAUNCH_PATH": str(FIXTURES)}
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One real 2-rank torchrun job per recorded output, all submitted before waiting for any."""
    home = tmp_path_factory.mktemp("home")
    ids = {}
    for key, (name, rank, end, _) in JOBS.items():
        args = ["--mode", "recorded", "--rank", str(rank), "--file", str(FIXTURES / "failures" / name)]
        args += ["--abort"] if end == "abort" else []
        done = cli(home, "submit", "failmodes", "--profile", "local", "--set", f"args={json.dumps(args)}",
                   "--parsable")
        assert done.returncode == 0, done.stderr
        ids[key] = done.stdout.strip()
    for job in ids.values():
        cli(home, "logs", job, "--follow")  # returns when the job has ended (exit 1: it failed, as it should)
    return home, ids


@pytest.mark.parametrize("key", sorted(JOBS))
def test_diagnosis_names_the_ranks_own_evidence(jobs: tuple[Path, dict[str, str]], key: str) -> None:
    home, ids = jobs
    name, rank, end, (cause, op, seq, timeout) = JOBS[key]
    done = cli(home, "logs", ids[key], "--diagnose", "--json")
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert d["state"] == "FAILED" and d["first_failure"]["rank"] == str(rank), d  # torchrun's own summary
    assert d["first_failure"]["exit"] == ("134" if end == "abort" else "1")
    assert (d["cause"], d["rank"], d["operation"], d["seq_num"], d["timeout_ms"]) == (cause, rank, op, seq, timeout), d
    assert d["file"].endswith(f"rank-{rank}.restart-0.log") and d["error"] in (FIXTURES / "failures" / name).read_text()
    if cause == "collective_timeout":  # the other rank never reported the timeout: it is the suspect
        assert d["suspect_ranks"] == [1 - rank] and f"--rank {1 - rank} --tail 50" in d["hint"]
    out = next((home / "runs").glob(f"*/logs/job.{ids[key]}.out")).read_text()
    # the default launch has no torchrun agent to print its "Root Cause" summary: the first failure came from the
    # ranks' own exit records (test_each_class_inside_a_real_job keeps torchrun's agent and its real summary)
    assert "Root Cause (first observed failure)" not in out
    text = cli(home, "logs", ids[key], "--diagnose").stdout
    assert "without an error message" not in text and f"on rank {rank}" in text


def _excerpts() -> dict[str, tuple[str, str]]:
    """Each class -> (its excerpt: a dev file of the corpus, its own log if it can be, else the first rule example
    of a class with no dev file; the launcher it came from: msrun, deepspeed or torchrun). Held-out files are not
    used here: they measure the rules (benchmarks/diagnose_accuracy.py)."""
    from hpclaunch.logs.rules import RULES

    files = json.loads((FIXTURES / "failures" / "split.json").read_text())["files"]
    dev = sorted((not e["where"].startswith(("rank", "only", "msrun")), name, e) for name, e in files.items()
                 if e["part"] == "dev")
    out: dict[str, tuple[str, str]] = {}
    for _, name, e in dev:
        if e["class"] not in out:
            launcher = ("msrun" if e["where"].startswith("msrun") or "mindspore" in name or "mindact" in name
                        else "deepspeed" if "deepspeed" in name or "_ds" in name else "torchrun")
            out[e["class"]] = (str(FIXTURES / "failures" / name), launcher)
    for rule in RULES:
        if rule.name not in out and rule.examples:
            out[rule.name] = ("example:" + rule.examples[0], "torchrun")
    if not MSRUN.exists():
        out = {c: (f, "torchrun" if launcher == "msrun" else launcher) for c, (f, launcher) in out.items()}
    return out


EXCERPTS = _excerpts()
BATCHES: dict[str, tuple[str, list[str]]] = {}
for _launcher in ("torchrun", "deepspeed", "msrun"):
    _classes = sorted(c for c, (_, launcher) in EXCERPTS.items() if launcher == _launcher)
    for _i in range(0, len(_classes), RANKS_PER_JOB):
        BATCHES[f"{_launcher}-{_i // RANKS_PER_JOB}"] = (_launcher, _classes[_i:_i + RANKS_PER_JOB])


@pytest.fixture(scope="module")
def class_jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One real job per batch of classes, each rank printing one class's excerpt, all submitted before waiting."""
    home = tmp_path_factory.mktemp("home")
    examples = tmp_path_factory.mktemp("examples")
    ids = {}
    for key, (launcher, classes) in BATCHES.items():
        paths = []
        for cls in classes:
            source = EXCERPTS[cls][0]
            if source.startswith("example:"):  # a class with no recorded dev file: its rule's own example
                (examples / f"{cls}.log").write_text(source.removeprefix("example:") + "\n")
                source = str(examples / f"{cls}.log")
            paths.append(source)
        args = ["--mode", "recorded", "--files", *paths]
        extra = ["--set", f"launcher={launcher}"] + (["--set", "python_env=mindspore"] if launcher == "msrun" else [])
        extra += ["--set", "launch.agent=torchrun"] if launcher == "torchrun" else []  # its real summary around them
        done = cli(home, "submit", "failmodes", "--profile", "local", "--layout", f"1n{len(classes)}g", *extra,
                   "--set", f"args={json.dumps(args)}", "--parsable")
        assert done.returncode == 0, done.stderr
        ids[key] = done.stdout.strip()
    for job in ids.values():
        cli(home, "logs", job, "--follow")
    return home, ids


def _rank_of(file: str | None) -> int | None:
    name = Path(file or "").name
    for prefix in ("rank-", "worker_"):
        if name.startswith(prefix):
            return int(name.removeprefix(prefix).split(".")[0])
    return None


def test_every_class_is_in_a_batch() -> None:
    from hpclaunch.logs.rules import RULES

    corpus = {e["class"] for e in json.loads((FIXTURES / "failures" / "split.json").read_text())["files"].values()}
    batched = [c for _, classes in BATCHES.values() for c in classes]
    assert len(batched) == len(set(batched)) and corpus | {r.name for r in RULES if r.examples} <= set(batched)


@pytest.mark.parametrize("key", sorted(BATCHES))
def test_each_class_inside_a_real_job(class_jobs: tuple[Path, dict[str, str]], key: str) -> None:
    home, ids = class_jobs
    launcher, classes = BATCHES[key]
    done = cli(home, "logs", ids[key], "--diagnose", "--json")
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert d["state"] == "FAILED" and 0 < d["confidence"] <= 1, d
    found: dict[int, str] = {}
    for c in [{"class": d["cause"], "file": d["file"]}, *d["candidates"]]:
        rank = _rank_of(c["file"])
        if rank is not None:
            found.setdefault(rank, c["class"])
    assert found == dict(enumerate(classes)), (launcher, d["cause"], d["candidates"])
    assert d["cause"] in classes
    if launcher != "msrun":  # torchrun's (and the DeepSpeed launcher's) real summary was there
        out = next((home / "runs").glob(f"*/logs/job.{ids[key]}.out")).read_text()
        assert "Root Cause (first observed failure)" in out
