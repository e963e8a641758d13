"""Why did a job fail? Scan the end of every rank log of the latest restart and of the batch output
with one regular expression over bytes, classify the few matching lines (hpclaunch.logs.rules), and
pick the first failing rank: the one torchrun names as root cause, else a rank with a real error
(not the cascade that follows it) that stopped writing first."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpclaunch.logs.read import read_tail_bytes
from hpclaunch.logs.rules import ALL_KEYS, BY_NAME, Rule, classify
from hpclaunch.runfiles import LogFile, RunFiles
from hpclaunch.schedulers.base import JobStatus

# Errors sit at the end of a log (a traceback is a rank's last words): read the last 32 KiB, and
# only when nothing is found there, up to 128 KiB.
TAIL_FIRST = 32 * 1024
TAIL_BYTES = 128 * 1024

_ROOT_CAUSE = re.compile(
    rb"Root Cause \(first observed failure\):\s*\[\d+\]:\s*time\s*:\s*(?P<time>\S+)"
    rb"\s*host\s*:\s*(?P<host>\S+)"
    rb"\s*rank\s*:\s*(?P<rank>\d+)[^\n]*\s*exitcode\s*:\s*(?P<exit>-?\d+)")
_RANK_ECHO = re.compile(rb"^\[rank\d+\]: ")
# A traceback's source lines ("  File ...", "    raise X(") are not the error: its last line is.
_CODE_LINE = re.compile(rb"^(?>(?:\[rank\d+\]: ?)*)(?:[ \t]|File \")")
# The job script's first line in every run: "hpclaunch: job J restart N on ..."
_RESTART_MARK = b"hpclaunch: job "
_JOB_STATES = {"TIMEOUT": "slurm_timeout", "PREEMPTED": "preempted", "NODE_FAIL": "node_fail",
               "OUT_OF_MEMORY": "host_oom", "DEADLINE": "slurm_timeout"}


@dataclass(frozen=True)
class Hit:
    rule: str
    line: str
    file: str
    offset: int  # byte offset of the line in its file


@dataclass
class RankScan:
    rank: int
    file: str
    mtime: float
    primary: Hit | None = None
    secondary: Hit | None = None


@dataclass
class Diagnosis:
    job_id: str
    state: str | None
    exit_code: str | None
    restart: int | None
    ranks: int
    cause: str | None  # a rule name, "exited", or None when nothing went wrong
    title: str
    rank: int | None = None
    error: str | None = None  # the first real error line
    file: str | None = None
    hint: str = ""
    first_failure: dict[str, str] | None = None  # torchrun's root cause: time, host, rank, exit
    waiting_ranks: list[int] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _candidate_lines(data: bytes) -> list[int]:
    """Start offsets of the lines of `data` that hold any rule's key, in order."""
    starts: set[int] = set()
    find, rfind = data.find, data.rfind
    for key in ALL_KEYS:
        i = find(key)
        while i >= 0:
            s = rfind(b"\n", 0, i) + 1
            starts.add(s)
            e = find(b"\n", i)
            if e < 0:
                break
            i = find(key, e)
    return sorted(starts)


def scan_bytes(data: bytes, base: int, file: str, *, skip_echo: bool = False) -> list[Hit]:
    """Every classified line of `data` (which starts at byte `base` of `file`), in order."""
    hits: list[Hit] = []
    for s in _candidate_lines(data):
        e = data.find(b"\n", s)
        line = data[s:] if e < 0 else data[s:e]
        if (skip_echo and _RANK_ECHO.match(line)) or (_CODE_LINE.match(line) and b"exitcode" not in line):
            continue
        rule = classify(line)
        if rule is not None:
            hits.append(Hit(rule.name, line.decode("utf-8", "replace").strip(), file, base + s))
    return hits


def _read_ends(path: Path, size: int = TAIL_BYTES) -> tuple[int, bytes]:
    if os.path.getsize(path) <= size:
        with open(path, "rb") as f:
            return 0, f.read()
    return read_tail_bytes(path, size)


def scan_rank(lf: LogFile) -> RankScan:
    base, data = _read_ends(lf.path, TAIL_FIRST)
    hits = scan_bytes(data, base, str(lf.path))
    if not hits and base > 0:
        base, data = _read_ends(lf.path, TAIL_BYTES)
        hits = scan_bytes(data, base, str(lf.path))
    scan = RankScan(lf.rank, str(lf.path), lf.path.stat().st_mtime)
    for hit in hits:
        if BY_NAME[hit.rule].primary:
            if scan.primary is None:
                scan.primary = hit
        elif scan.secondary is None:
            scan.secondary = hit
    return scan


def _root_cause(data: bytes) -> dict[str, str] | None:
    found = [{k: v.decode() for k, v in m.groupdict().items()} for m in _ROOT_CAUSE.finditer(data)]
    return min(found, key=lambda d: d["time"]) if found else None


def diagnose(run_dir: Path, job_id: str, status: JobStatus | None = None) -> Diagnosis:
    state = status.state if status else None
    exit_code = status.exit_code if status else None
    all_files = RunFiles(run_dir).rank_logs()
    restarts = sorted({f.restart for f in all_files})
    restart = restarts[-1] if restarts else None
    files = [f for f in all_files if f.restart == restart]
    scans = [scan_rank(f) for f in files]

    batch_hits: list[Hit] = []
    root: dict[str, str] | None = None
    outs = RunFiles(run_dir).job_outputs()
    for out in outs:
        base, data = _read_ends(out)
        start = data.rfind(_RESTART_MARK)  # only the latest run of a requeued job
        if start > 0:
            start = data.rfind(b"\n", 0, start) + 1
            base, data = base + start, data[start:]
        batch_hits += scan_bytes(data, base, str(out), skip_echo=True)
        root = _root_cause(data) or root

    d = Diagnosis(job_id, state, exit_code, restart, len(files), None, "no failure found",
                  first_failure=root, restarts=restarts)

    def verdict(rule: Rule, hit: Hit | None, rank: int | None) -> Diagnosis:
        d.cause, d.title, d.rank = rule.name, rule.title, rank
        shown = rank if rank is not None else 0
        d.hint = rule.hint.replace("JOB", job_id).replace("--rank R", f"--rank {shown}")
        if hit:
            d.error, d.file = hit.line, hit.file
        if not rule.job_level:
            d.waiting_ranks = sorted(s.rank for s in scans if s.rank != rank and s.primary is None)
        return d

    if state == "COMPLETED":
        d.title = "the job completed"
        return d

    # 1. Slurm ended the whole job (time limit, preemption, node failure, cgroup OOM).
    job_rule = _JOB_STATES.get(state or "")
    job_hit = next((h for h in batch_hits if BY_NAME[h.rule].job_level), None)
    if job_hit and not job_rule:
        job_rule = job_hit.rule
    if job_rule:
        return verdict(BY_NAME[job_rule], job_hit if job_hit and job_hit.rule == job_rule else None, None)

    # 2. A rank with a real error: torchrun's root-cause rank if it has one, else the one that stopped first.
    failed = [s for s in scans if s.primary is not None]
    if failed:
        by_rank = {s.rank: s for s in failed}
        first = by_rank.get(int(root["rank"])) if root else None
        first = first or min(failed, key=lambda s: (s.mtime, s.rank))
        assert first.primary is not None
        return verdict(BY_NAME[first.primary.rule], first.primary, first.rank)

    # 3. The batch output names a cause (the launcher could not bind its port, a module was missing...).
    batch_primary = next((h for h in batch_hits if BY_NAME[h.rule].primary), None)
    if batch_primary:
        rank = int(root["rank"]) if root else None
        return verdict(BY_NAME[batch_primary.rule], batch_primary, rank)

    # 4. A rank exited without a word (killed) while the others waited.
    if root:
        rank = int(root["rank"])
        code = int(root["exit"])
        if code in (-9, 137):
            return verdict(BY_NAME["host_oom"], None, rank)
        quiet = next((s for s in scans if s.rank == rank), None)
        d.file = quiet.file if quiet else None
        d.cause, d.rank = "exited", rank
        d.title = f"rank {rank} exited with code {code} without an error message"
        d.hint = (f"look at the last lines of its log (`hpclaunch logs {job_id} --rank {rank} --tail 50`); "
                  "a signal or os._exit ends a rank silently")
        d.waiting_ranks = sorted(s.rank for s in scans if s.rank != rank)
        return d

    # 5. Only the cascade: ranks timed out in a collective; the suspect is a rank that did not.
    waiting = [s for s in scans if s.secondary is not None]
    if waiting:
        silent = [s for s in scans if s.secondary is None]
        suspect = min(silent, key=lambda s: (s.mtime, s.rank)) if silent else None
        hit = min(waiting, key=lambda s: (s.mtime, s.rank)).secondary
        timeouts = [s for s in waiting if s.secondary and s.secondary.rule == "collective_timeout"]
        rule = BY_NAME["collective_timeout" if timeouts else "peer_failed"]
        result = verdict(rule, hit, suspect.rank if suspect else None)
        if rule.name == "peer_failed":
            result.title, result.hint = "ranks lost their peers", _hint_peer(job_id, suspect)
        return result

    if state and state not in ("COMPLETED", "RUNNING", "PENDING") or (exit_code and exit_code != "0:0"):
        d.cause, d.title = "exited", f"the job ended {state or ''} (exit {exit_code}) with no known error"
        d.hint = f"read the job output and the last lines of each rank (`hpclaunch logs {job_id} --tail 50`)"
    return d


def _hint_peer(job_id: str, suspect: RankScan | None) -> str:
    where = f"rank {suspect.rank}" if suspect else "one rank"
    return f"{where} went away first; read its log and the job's output (`hpclaunch logs {job_id} --tail 50`)"
