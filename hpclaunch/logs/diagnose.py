"""Why did a job fail? Read the end of every rank log of one restart (the latest by default) and of the batch
output, find the lines that hold a rule's key (hpclaunch.logs.rules) and classify them, and name the cause, the
first failing rank and its node, how sure the diagnosis is (`confidence`), the other evidence (`candidates`) and
what to do (hpclaunch.logs.hints makes the rule's hint concrete from the lines).

The evidence is ranked, the first of these that differs deciding:

1. the scheduler's words: Slurm ended the whole job (time limit, preemption, node failure), the watchdog ended a
   hang, a user cancelled it;
2. how specific it is: a named cause (out of memory, no space left, a missing library...) before a generic one (an
   exception of no known kind, a native crash, a collective library error), before the cascade (collectives timing
   out, peers lost, launchers tearing down) and before an exit code read as a cause;
3. time: torchrun's root-cause rank ("Root Cause (first observed failure)") first, then the ranks by when they
   stopped writing (ranks within a few seconds of the first count as one moment; the batch output, whose lines carry
   no time of their own, counts as that moment too); inside one log, the earlier line;
4. the taxonomy (rules.LAYERS): hardware, then infrastructure (network, filesystem, scheduler), then resources
   (memory, disk), then software (driver, library, package, launch), then user code; a cause lower in it explains
   the failures above it.

What a rank printed itself wins over what its launcher concluded from its exit: torchrun's "Root Cause" table (and
DeepSpeed's "exits with return code") only give an exit code, so a collective timeout in the root-cause rank's own
log is the cause, before the exit code is read as a signal (SIGABRT, SIGKILL) or as a rank that ended without a
word. A Python traceback whose exception no rule knows is quoted as it is (its type and message). When nothing is
found, the cause is "unknown" and the most suspicious lines are quoted: no cause is guessed.

A job that completed after recovering inside its allocation (hpclaunch.state.recoveries) says each recovery: its
cause, rank, node, the step it resumed from and the seconds to the next step. `restart=N` diagnoses that restart
(an earlier one: why it ended, from its logs and its recovery record)."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.logs import hints
from hpclaunch.logs.read import read_tail_bytes
from hpclaunch.logs.rules import ALL_KEYS, BY_NAME, ECHO_PREFIX, GROUPS, Rule, classify, layer_rank
from hpclaunch.state.runfiles import LogFile, RunFiles

if TYPE_CHECKING:
    from hpclaunch.schedulers.base import JobStatus

# Errors sit at the end of a log (a traceback is a rank's last words): read the last 32 KiB, and
# only when nothing is found there, up to 128 KiB.
TAIL_FIRST = 32 * 1024
TAIL_BYTES = 128 * 1024
# Ranks that stopped writing within this many seconds of each other stopped at one moment
SAME_MOMENT_S = 5.0

_ROOT_CAUSE = re.compile(
    rb"Root Cause \(first observed failure\):\s*\[\d+\]:\s*time\s*:\s*(?P<time>\S+)"
    rb"\s*host\s*:\s*(?P<host>\S+)"
    rb"\s*rank\s*:\s*(?P<rank>\d+)[^\n]*\s*exitcode\s*:\s*(?P<exit>-?\d+)")
_RANK_ECHO = re.compile(rb"^\[rank(\d+)\]: ")
_ECHO_PREFIX = re.compile(ECHO_PREFIX)
# pdsh's (the DeepSpeed launcher's) "host: " before a traceback's frames (not before "srun: error:")
_HOST_PREFIX = re.compile(rb"^(?=[\w.-]*[\d.-])[A-Za-z0-9][\w.-]*: (?=\s|File \")")  # a host: digits, dots, dashes
_TRACEBACK = b"Traceback (most recent call last)"
# The line after a traceback's frames: a (dotted) name with a lower-case letter (not a log level), then ":" or end
_EXCEPTION_LINE = re.compile(rb"^\s*(?:[A-Za-z_]\w*\.)*(?=[A-Z]\w*[a-z])[A-Za-z_]\w*(?::|\s*$)")
# The job script's first line in every run: "hpclaunch: job J restart N on ..."
_RESTART_MARK = b"hpclaunch: job "
_RESTART_LINE = re.compile(rb"^hpclaunch: job \S+ restart (\d+) ", re.MULTILINE)
# A launcher's summary of an exit (torchrun's failure table and "failed (exitcode: N)", DeepSpeed's "exits with
# return code", srun's task line): an inference from the exit code, weaker than what a rank printed itself
_EXIT_SUMMARY = re.compile(
    r"exitcode\s*:|\(exitcode: -?\d+\)|Signal \d+ \(SIG\w+\) received by PID|return code = -?\d+"
    r"|[Ee]xit(?:ed with exit)? code|WorkerExitError: msrun worker rank")
_JOB_STATES = {"TIMEOUT": "slurm_timeout", "PREEMPTED": "preempted", "NODE_FAIL": "node_fail",
               "OUT_OF_MEMORY": "host_oom", "DEADLINE": "slurm_timeout"}
# The rank a line names: "[rank3]:", "[Rank 3]", "[PG 1 Rank 3]", "RankID:3", "[3] is setting up NCCL", "rank=3"
_LINE_RANK = re.compile(
    r"\[rank(\d+)\]:|\[(?:PG [^\]]*?)?Rank (\d+)\]|RankID:(\d+)|\[(\d+)\] is setting up|\brank=(\d+)"
    r"|rankId\[(\d+)\]")
# The node a line names: NCCL's "host:pid:tid [dev] ...", srun's "srun: error: host: task(s) N: ...", the node-local
# stager's "error: node host: ..." (rules._STAGED)
_LINE_NODE = re.compile(
    r"(?:^|[\s\]:])([A-Za-z][\w.-]*):\d+:\d+ \[\d+\] |srun: error: ([A-Za-z][\w.-]*): tasks? [\d,-]+: "
    r"|(?:error|Error): (?:.*? failed: )?node ([A-Za-z][\w.-]*): ")
_OP = re.compile(r"OpType=(\w+)|OPS function error: (Hccl\w+)|\btag\[([A-Z][A-Za-z]+)_")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)|timed out after (\d+)ms|timeout:(\d+)min")
# torch 2.x names the work in several forms: SeqNum=N, "Timeout at NCCL work: N", "work sequence id: N"
_SEQ = re.compile(
    r"SeqNum=(\d+)|Timeout at NCCL work: (\d+)|work sequence id: (\d+)|detected by watchdog at work: (\d+)")
_WATCHDOG_STUCK = re.compile(r"watchdog got stuck for (\d+) seconds")
# the watchdog's own abort after a timeout (faulthandler, the C++ runtime): the timeout is the cause
_ABORT = re.compile(r"Aborted|SIGABRT|terminate called")
# A Python exception that only carries a collective's failure (the timeout in the same log is the cause)
_COLLECTIVE_WRAPPER = re.compile(r"Hccl|HCCL|NCCL|ACL stream|DistBackendError|ProcessGroup|communicator|c10d")
# Launcher and Slurm lines: they report an exit, not a lost peer
_LAUNCHER_LINE = re.compile(r"^(?:srun|slurmstepd|hpclaunch)\b")
# Lines worth quoting when no rule knows the failure (the words of any error, in any case)
_SUSPICIOUS = re.compile(
    rb"(?i)\b(?:error|errno|fail(?:ed|ure)?|fatal|abort(?:ed)?|exception|killed|denied|refused|unable|cannot"
    rb"|can't|could not|couldn't|invalid|timed? ?out|not found|no such|panic|terminate[ds]?|assert\w*|segfault)\b")
_CANDIDATES_SHOWN = 24
_PER_SOURCE = 3
# A line that says it is a warning (after a rank echo or a time stamp): "WARNING: ...", "2024-01-02 03:04 WARN ..."
_WARNING = re.compile(rb"^(?:[\s\d:.,/\[\]T-]*(?:WARNING|Warning|WARN)\b|[\w.-]+: warning: )")

# Each key with the longest run of word characters in it: a key can be in a log only if that word is part of one
# of the log's words, so a log's vocabulary (its distinct words, cheap to make) says which keys to search for at
# all (a quiet log's few words rule out nearly every key before any pass over it)
_WORD = re.compile(rb"[A-Za-z0-9_]+")
_GATES = tuple((key, max(_WORD.findall(key), key=len)) for key in ALL_KEYS)
_NOT_WORD = bytes(c for c in range(128) if not (chr(c).isalnum() or chr(c) == "_"))
_TO_WORDS = bytes.maketrans(_NOT_WORD, b" " * len(_NOT_WORD))  # every other ASCII byte to a space


@dataclass(frozen=True)
class Hit:
    rule: str
    line: str
    file: str
    offset: int  # byte offset of the line in its file
    generic: bool = False  # a generic row, or a line that calls itself a warning: any specific cause outranks it
    warning: bool = False  # a line that calls itself a warning: weaker still (after every generic cause)


@dataclass
class RankScan:
    rank: int
    file: str
    mtime: float
    primary: Hit | None = None
    secondary: Hit | None = None
    hits: list[Hit] = field(default_factory=list)
    summary: Hit | None = None  # a launcher's note of this rank's exit code (msrun's worker wrapper)


@dataclass
class Diagnosis:
    job_id: str
    state: str | None
    exit_code: str | None
    restart: int | None
    ranks: int
    cause: str | None  # a rule name, "exited", "unknown", or None when nothing went wrong
    title: str
    rank: int | None = None
    error: str | None = None  # the first real error line
    file: str | None = None
    hint: str = ""
    node: str | None = None  # the node of the failing rank (NCCL's host prefix, srun's task line, its progress record)
    operation: str | None = None  # a timed-out collective: OpType (ALLREDUCE, _ALLGATHER_BASE) or HCCL op
    timeout_ms: int | None = None  # the collective's timeout
    seq_num: int | None = None  # the timed-out collective's sequence number (torch's SeqNum / NCCL work)
    suspect_ranks: list[int] = field(default_factory=list)  # a collective timeout: ranks that did not report it
    first_failure: dict[str, str] | None = None  # torchrun's root cause: time, host, rank, exit
    waiting_ranks: list[int] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)
    checkpoint: str | None = None  # a cancelled job: the newest checkpoint, which a rerun resumes from
    confidence: float = 0.0  # how sure: 0.95 the scheduler's word, 0.9 a specific line, 0.6 an exception, ... 0 unknown
    layer: str | None = None  # the cause's place: hardware, infrastructure, resources, software or user code
    candidates: list[dict[str, Any]] = field(default_factory=list)  # the other evidence: class, line, file, rank
    suspicious: list[dict[str, Any]] = field(default_factory=list)  # cause unknown: the lines most like an error
    recoveries: list[dict[str, Any]] = field(default_factory=list)  # relaunches inside the allocation

    def to_dict(self) -> dict:
        return asdict(self)


def _candidate_lines(data: bytes) -> list[int]:
    """Start offsets of the lines of `data` that hold any rule's key, in order."""
    vocabulary = b" ".join(set(data.translate(_TO_WORDS).split()))
    starts: set[int] = set()
    find, rfind = data.find, data.rfind
    for key, gate in _GATES:
        if gate not in vocabulary:
            continue
        i = find(key)
        while i >= 0:
            s = rfind(b"\n", 0, i) + 1
            starts.add(s)
            e = find(b"\n", i)
            if e < 0:
                break
            i = find(key, e)
    return sorted(starts)


def _line_at(data: bytes, s: int) -> tuple[bytes, int]:
    e = data.find(b"\n", s)
    return (data[s:], len(data)) if e < 0 else (data[s:e], e)


def _words(line: bytes) -> bytes:
    """A line without what launchers and collectors put before it (_ECHO_PREFIX; pdsh's host before a frame)."""
    words = _ECHO_PREFIX.sub(b"", line)
    return _HOST_PREFIX.sub(b"", words)


def _is_code(data: bytes, s: int, line: bytes) -> bool:
    """A traceback's frame line or the source line under it (`  File "...", line N`, then `    raise X(...)`): what
    it quotes is code, not an error. An indented line is code only below a frame line (an indented JSON error,
    HCCL's indented reasons and torchrun's table are not)."""
    words = _words(line)
    if words.lstrip().startswith(b'File "'):
        return True
    if words[:1] not in (b" ", b"\t"):
        return False
    pos = s
    for _ in range(6):
        if pos == 0:
            return False
        start = data.rfind(b"\n", 0, pos - 1) + 1
        above = _words(data[start:pos - 1])
        if above.lstrip().startswith(b'File "'):
            return True
        if above[:1] not in (b" ", b"\t"):
            return False
        pos = start
    return False


def _exception_after(data: bytes, pos: int, host: bytes) -> tuple[int, bytes, bytes] | None:
    """The exception line that ends the traceback whose frames start at `pos` (None: the log ends in its frames);
    `host`: the header's own "host: " prefix (pdsh), which its exception line has too."""
    for _ in range(400):
        if pos >= len(data):
            return None
        line, end = _line_at(data, pos)
        words = _words(line)
        if host and words.startswith(host):
            words = words[len(host):]
        if words.strip() and words[:1] not in (b" ", b"\t") and not words.startswith(b'File "'):
            if words.startswith(_TRACEBACK):
                return None
            return (pos, line, words) if _EXCEPTION_LINE.match(words) else None
        pos = end + 1
    return None


def _hit(rule: Rule, line: bytes, words: bytes, file: str, offset: int) -> Hit:
    """A classified line; one that calls itself a warning is weaker evidence than the failure it comes before."""
    warning = rule.primary and _WARNING.match(words) is not None
    return Hit(rule.name, line.decode("utf-8", "replace").strip(), file, offset, rule.generic or warning, warning)


def scan_bytes(data: bytes, base: int, file: str, *, skip_echo: bool | set[int] = False) -> list[Hit]:
    """Every classified line of `data` (which starts at byte `base` of `file`), in order; the exception line that
    ends each traceback is one, whatever it says (an exception no rule knows is a `python_error`). `skip_echo`: leave
    out torch's "[rankN]: " echo of a rank's lines (True: of every rank; a set: of those ranks, which have logs of
    their own that say it first hand)."""
    def echo(line: bytes) -> bool:
        m = _RANK_ECHO.match(line) if skip_echo else None
        return m is not None and (skip_echo is True or (isinstance(skip_echo, set) and int(m.group(1)) in skip_echo))

    found: dict[int, Hit] = {}
    for s in _candidate_lines(data):
        line, end = _line_at(data, s)
        words = _ECHO_PREFIX.sub(b"", line)
        at = words.find(_TRACEBACK)
        if at >= 0 and (at == 0 or not words[:at].strip() or words[:at].endswith(b": ")):
            after = _exception_after(data, end + 1, words[:at] if words[:at].strip() else b"")
            if after and after[0] not in found and not echo(after[1]):
                known = classify(after[2]) or BY_NAME["python_error"]
                found[after[0]] = _hit(known, after[1], after[2], file, base + after[0])
            continue
        if s in found or echo(line) or _is_code(data, s, line):
            continue
        rule = classify(words)
        if rule is not None:
            found[s] = _hit(rule, line, words, file, base + s)
    return _demote_wrappers([found[s] for s in sorted(found)])


def _demote_wrappers(hits: list[Hit]) -> list[Hit]:
    """A `RuntimeError: ... HcclAllreduce, error code is 6` next to a collective timeout is that timeout
    surfacing in Python, and a `Fatal Python error: Aborted` the watchdog's abort: not causes of their own."""
    if not any(h.rule == "collective_timeout" for h in hits):
        return hits
    return [replace(h, rule="collective_timeout", generic=False) if _wraps_timeout(h) else h for h in hits]


def _wraps_timeout(hit: Hit) -> bool:
    return ((hit.rule == "python_error" and _COLLECTIVE_WRAPPER.search(hit.line) is not None)
            or (hit.rule == "segfault" and _ABORT.search(hit.line) is not None))


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    for line in lines:
        m = pattern.search(line)
        if m:
            return next(g for g in m.groups() if g is not None)
    return None


def _line_rank(line: str) -> int | None:
    found = _first(_LINE_RANK, [line])
    return int(found) if found is not None else None


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
    scan = RankScan(lf.rank, str(lf.path), lf.path.stat().st_mtime, hits=hits)
    scan.primary = _first_cause([h for h in hits if not _EXIT_SUMMARY.search(h.line)])
    scan.summary = next((h for h in hits if _EXIT_SUMMARY.search(h.line)), None)
    scan.secondary = next((h for h in hits if not BY_NAME[h.rule].primary), None)
    return scan


def _strength(hit: Hit) -> int:
    """0: a specific cause; 1: a generic one (an exception of no known kind, a native crash, a NCCL/HCCL failure that
    its `Last error:` may name more precisely); 2: a cause a warning line names; 3: the cascade."""
    if not BY_NAME[hit.rule].primary:
        return 3
    return 2 if hit.warning else int(hit.generic)


def _first_cause(hits: list[Hit]) -> Hit | None:
    """The first of the strongest causes (_strength)."""
    causes = [h for h in hits if BY_NAME[h.rule].primary]
    return min(causes, key=_strength) if causes else None


def _root_cause(data: bytes) -> dict[str, str] | None:
    found = [{k: v.decode() for k, v in m.groupdict().items()} for m in _ROOT_CAUSE.finditer(data)]
    return min(found, key=lambda d: d["time"]) if found else None


def _first_exit(run: RunFiles, restart: int) -> dict[str, str] | None:
    """Without torchrun's agent (launch.agent none or auto) nobody prints a root cause: the first failing rank is
    the earliest exit that rank_exec recorded (its code and host), as torchrun would have named it. The node's
    other ranks, stopped after it, exit later."""
    found = []
    for path in run.rank_exits(restart):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
            found.append((float(rec.get("time") or path.stat().st_mtime), rec))
        except (OSError, ValueError, TypeError):
            continue
    if not found:
        return None
    when, rec = min(found, key=lambda f: (f[0], int(f[1].get("rank", 0))))
    code = int(rec["code"])  # the child's status; the rank's exit code, as torchrun sees it: 128 + a signal's number
    return {"time": time.strftime("%Y-%m-%d_%H:%M:%S", time.localtime(when)), "host": str(rec.get("host") or "?"),
            "rank": str(rec["rank"]), "exit": str(128 - code if code < 0 else code)}


def _hung(d: Diagnosis, run: RunFiles, restart: int, job_id: str) -> bool:
    """Fill `d` from the watchdog's verdict of this restart, if there is one."""
    try:
        found = json.loads(run.watchdog_verdict(restart).read_text())
    except (OSError, ValueError):
        return False
    hung = [int(r) for r in found.get("hung", [])]
    ranks = found.get("ranks", {})
    d.cause, d.title = "hung", str(found.get("summary", "the job hung"))
    d.rank = hung[0] if hung else None
    d.waiting_ranks = [int(r) for r in found.get("waited", [])]
    d.node = ranks.get(str(d.rank), {}).get("host") if d.rank is not None else None
    d.file = str(run.watchdog_verdict(restart))
    d.confidence, d.layer = 0.9, "user code"
    shown = d.rank if d.rank is not None else 0
    without = f" --exclude {d.node}" if d.node and not _local(run) else ""
    d.hint = (f"the watchdog ended the job after {found.get('stalled_for', '?')} s without progress (timeout "
              f"{found.get('timeout', '?')} s); see where rank {shown} stopped: hpclaunch logs {job_id} --rank "
              f"{shown} --tail 50" + (f"; if node {d.node} is at fault, go on from the last checkpoint without it: "
                                      f"hpclaunch resume {job_id}{without}" if without else ""))
    return True


def diagnose(run_dir: Path, job_id: str, status: JobStatus | None = None, *, restart: int | None = None,
             local: bool = True) -> Diagnosis:
    """Why the job ended as it did, from one restart's rank logs (the latest unless `restart`), the batch output
    and the scheduler's state. `local`: the run directory is the job's own (not a copy of a remote run's log ends),
    so the free space of its filesystems can be measured."""
    run = RunFiles(run_dir)
    all_files = run.rank_logs()
    restarts = sorted({f.restart for f in all_files})
    latest = restarts[-1] if restarts else None
    if restart is not None and restarts and restart not in restarts:
        from hpclaunch.errors import NotFoundError

        raise NotFoundError("restart", str(restart), map(str, restarts),
                            hint=f"`hpclaunch logs {job_id} --diagnose` diagnoses the latest")
    chosen = restart if restart is not None else latest
    earlier = chosen is not None and latest is not None and chosen < latest
    state = None if earlier else (status.state if status else None)
    exit_code = None if earlier else (status.exit_code if status else None)
    scans = [scan_rank(f) for f in all_files if f.restart == chosen]
    batch_hits, root = _scan_batch_output(run_dir, chosen, latest, {s.rank for s in scans})
    root = root or (_first_exit(run, chosen) if chosen is not None else None)
    d = Diagnosis(job_id, state, exit_code, chosen, len(scans), None, "no failure found",
                  first_failure=root, restarts=restarts, recoveries=_recoveries(run))
    state_word = state.split()[0] if state else ""
    if state_word == "COMPLETED":
        return _completed(d)
    found = _Evidence(d, run_dir, state_word, scans, batch_hits, root, local,
                      _recovery_of(d.recoveries, chosen) if earlier else None)
    for step in _STEPS:
        verdict = step(found)
        if verdict is not None:
            verdict.candidates = found.candidates(verdict)
            if verdict.candidates and verdict.confidence >= 0.9 and any(
                    c["class"] != verdict.cause and not c["generic"] and c["primary"] for c in verdict.candidates):
                verdict.confidence = round(verdict.confidence * 0.75, 2)  # another specific cause disagrees
            return verdict
    return _unexplained(d, found)


def _recoveries(run: RunFiles) -> list[dict[str, Any]]:
    """The job's relaunches inside its allocation: restart, cause, rank, node, step resumed from, seconds from the
    fault's detection to the next step."""
    from hpclaunch.state import recoveries

    try:
        found = recoveries.load(run)
    except (OSError, ValueError):
        return []
    out = []
    for r in found:
        rec = {"restart": r.get("restart"), "cause": r.get("cause"), "rank": r.get("rank"), "node": r.get("node"),
               "step": r.get("resumed_step"), "seconds_to_next_step": r.get("seconds_to_first_step"),
               "reason": r.get("reason"), "nodes": r.get("nodes")}
        out.append({**rec, "summary": recovery_line(rec)})
    return out


def _recovery_of(recs: list[dict[str, Any]], restart: int | None) -> dict[str, Any] | None:
    return next((r for r in recs if r.get("restart") == restart), None)


def recovery_line(rec: dict[str, Any]) -> str:
    """`restart 0: node_lost: rank 0 on node1, resumed from step 8, next step 9.4 s after`."""
    took = rec.get("seconds_to_next_step")
    after = f"next step {took} s after" if took is not None else "no step finished after it yet"
    rank = f"rank {rec['rank']}" if rec.get("rank") is not None else "a rank"
    node = f" on {rec['node']}" if rec.get("node") else ""
    on = f" on {rec['nodes']}" if rec.get("nodes") else ""
    return (f"restart {rec.get('restart')}: {rec.get('cause')}: {rank}{node}, resumed from step {rec.get('step')}"
            f"{on}, {after}")


def _completed(d: Diagnosis) -> Diagnosis:
    """A job that completed, and what it recovered from on the way."""
    d.title, d.confidence = "the job completed", 0.95
    n = len(d.recoveries)
    if n:
        d.title = f"the job completed after {n} recover{'y' if n == 1 else 'ies'} inside its allocation"
        d.hint = (f"each recovery's evidence: hpclaunch logs {d.job_id} --diagnose --restart N (N: "
                  f"{', '.join(str(r.get('restart')) for r in d.recoveries)})")
    return d


def _scan_batch_output(run_dir: Path, restart: int | None, latest: int | None, ranks: set[int]
                       ) -> tuple[list[Hit], dict[str, str] | None]:
    """The batch output's classified lines and torchrun's root cause, of one restart's run only (a requeue and a
    relaunch append: each run starts with the job script's "hpclaunch: job J restart N" line)."""
    batch_hits: list[Hit] = []
    root: dict[str, str] | None = None
    for out in RunFiles(run_dir).job_outputs():
        base, data = _read_ends(out)
        base, data = _slice_restart(base, data, restart, latest)
        batch_hits += scan_bytes(data, base, str(out), skip_echo=ranks)
        root = _root_cause(data) or root
    return batch_hits, root


def _slice_restart(base: int, data: bytes, restart: int | None, latest: int | None) -> tuple[int, bytes]:
    marks = [(int(m.group(1)), m.start()) for m in _RESTART_LINE.finditer(data)]
    if restart is not None:
        mine = [i for i, (n, _) in enumerate(marks) if n == restart]
        if mine:
            i = mine[-1]
            end = marks[i + 1][1] if i + 1 < len(marks) else len(data)
            return base + marks[i][1], data[marks[i][1]:end]
    if restart is None or restart == latest:  # only the latest run of a requeued job
        start = data.rfind(_RESTART_MARK)
        if start > 0:
            start = data.rfind(b"\n", 0, start) + 1
            return base + start, data[start:]
    return base, data


@dataclass
class _Evidence:
    """What the logs say, and the diagnosis the steps below fill from it (the first step that finds a cause wins)."""

    d: Diagnosis
    run_dir: Path
    state_word: str
    scans: list[RankScan]
    batch_hits: list[Hit]
    root: dict[str, str] | None
    local: bool = True
    recovery: dict[str, Any] | None = None  # an earlier restart's recovery record: why it ended, per hpclaunch
    hits_of: dict[str, list[Hit]] = field(init=False)
    rank_of: dict[str, int] = field(init=False)
    scan_of: dict[str, RankScan] = field(init=False)
    t0: float = field(init=False)

    def __post_init__(self) -> None:
        self.hits_of = {s.file: s.hits for s in self.scans}
        self.rank_of = {s.file: s.rank for s in self.scans}
        self.scan_of = {s.file: s for s in self.scans}
        failed = [s.mtime for s in self.scans if s.primary is not None]
        self.t0 = min(failed) if failed else 0.0

    def order(self, hit: Hit) -> tuple:
        """Where a piece of evidence ranks (lower first): cause before cascade, specific before generic, torchrun's
        root-cause rank, then the moment its source stopped, then the taxonomy, then the exact time and place."""
        scan = self.scan_of.get(hit.file)
        strength = _strength(hit)
        if scan is None:  # the batch output: its lines carry no time, they count as the first moment
            moment, when, where = 0, self.t0, 1
        else:
            root = self.root is not None and int(self.root["rank"]) == scan.rank
            moment = -1 if root else int(max(scan.mtime - self.t0, 0.0) // SAME_MOMENT_S)
            when, where = scan.mtime, 0
        return strength, moment, layer_rank(hit.rule), when, where, hit.offset

    def verdict(self, rule: Rule, hit: Hit | None, rank: int | None, confidence: float) -> Diagnosis:
        """Name the cause: the rule, the line that shows it and the rank to blame (from the line when not given)."""
        d, root = self.d, self.root
        context = [hit.line] if hit else []
        if hit:
            context += [h.line for h in self.hits_of.get(hit.file, self.batch_hits) if h is not hit]
            if rank is None and not rule.job_level:
                rank = _line_rank(hit.line)
                rank = self.rank_of.get(hit.file) if rank is None else rank
        d.cause, d.title, d.rank = rule.name, rule.title, rank
        d.confidence, d.layer = confidence, GROUPS.get(rule.layer)
        d.node = _first(_LINE_NODE, context) or (root["host"] if root and not rule.job_level else None)
        if d.node is None and rank is not None and d.restart is not None and not rule.job_level:
            d.node = _progress_host(self.run_dir, rank, d.restart)
        if d.node is None and self.recovery and self.recovery.get("rank") == rank and self.recovery.get("node"):
            d.node = str(self.recovery["node"])  # the node hpclaunch blamed when it relaunched after this restart
        shown = rank if rank is not None else 0
        title, before = hints.refine(rule.name, hit.line if hit else None, context,
                                     hints.Facts(d.job_id, d.node, rank, self.run_dir, self.local))
        d.title = title or d.title
        d.hint = before + rule.hint.replace("JOB", d.job_id).replace("--rank R", f"--rank {shown}")
        if rule.node_fault and _local(RunFiles(self.run_dir)):  # one machine: there is no other node to run on
            d.hint = d.hint.replace(" (--exclude NODE)", "").replace(" --exclude NODE", "").replace(
                ", --exclude NODE if it repeats there", "").replace("; on one node only: --exclude NODE", "")
        d.title = d.title.replace("NODE", d.node or "a node")
        d.hint = d.hint.replace("NODE", d.node or "<node>")
        if hit:
            d.error, d.file = hit.line, hit.file
        if not rule.job_level:
            d.waiting_ranks = sorted(s.rank for s in self.scans if s.rank != rank and s.primary is None)
        if rule.name == "collective_timeout":
            _describe_collective(d, context)
            if hit and hit.file in self.hits_of:  # a rank's own log: the others' logs say who did not report it
                self.name_suspects(rank)
        return d

    def name_suspects(self, rank: int | None) -> None:
        """A collective timeout: the ranks that printed nothing wrong did not report it, so they are the suspects
        (they hung, crashed or ran slow before the collective, or the launcher ended them first); the rank that
        reported it only waited."""
        d = self.d
        d.suspect_ranks = sorted(s.rank for s in self.scans if s.rank != rank and not s.hits)
        d.waiting_ranks = [r for r in d.waiting_ranks if r not in d.suspect_ranks]
        if d.suspect_ranks:
            ranks = ", ".join(map(str, d.suspect_ranks[:16])) + (" ..." if len(d.suspect_ranks) > 16 else "")
            d.hint = (f"rank(s) {ranks} did not report the timeout: if their last lines (`hpclaunch logs "
                      f"{d.job_id} --rank {d.suspect_ranks[0]} --tail 50`) show them stopped before the collective "
                      "(hung, crashed or much slower), start there (the launcher may also have ended them right "
                      "after the first timeout); if not, check the network between the nodes (NCCL_DEBUG=INFO) or "
                      "raise the profile's collective_timeout")

    def causes(self) -> list[Hit]:
        """Every source's cause: each rank log's, and the batch output's (not its launchers' exit summaries)."""
        found = [s.primary for s in self.scans if s.primary is not None]
        batch = _first_cause([h for h in self.batch_hits if not _EXIT_SUMMARY.search(h.line)])
        return found + ([batch] if batch else [])

    def candidates(self, d: Diagnosis) -> list[dict[str, Any]]:
        """The other evidence, best first: each source's (rank log's, the batch output's) causes, strongest and
        earliest first, one line per class, up to _PER_SOURCE of them; a source with no cause of its own gives the
        first line of its cascade. The sources in the order of their best line (_Evidence.order)."""
        chosen = (d.cause, d.file, d.error)
        groups: list[list[Hit]] = []
        for hits in [*self.hits_of.values(), self.batch_hits]:
            causes = sorted((h for h in hits if BY_NAME[h.rule].primary), key=lambda h: (_strength(h), h.offset))
            cascade = [h for h in hits if not BY_NAME[h.rule].primary][:1]
            picked: list[Hit] = []
            for h in causes or cascade:
                if h.rule not in {p.rule for p in picked} and len(picked) < _PER_SOURCE:
                    picked.append(h)
            if picked:
                groups.append(picked)
        out: list[dict[str, Any]] = []
        for group in sorted(groups, key=lambda g: self.order(g[0])):
            for h in group:
                if (h.rule, h.file, h.line) == chosen:
                    continue
                rank = self.rank_of.get(h.file)
                out.append({"class": h.rule, "line": h.line, "file": h.file,
                            "rank": _line_rank(h.line) if rank is None else rank,
                            "layer": GROUPS.get(BY_NAME[h.rule].layer), "primary": BY_NAME[h.rule].primary,
                            "generic": h.generic})
        return out[:_CANDIDATES_SHOWN]


def _progress_host(run_dir: Path, rank: int, restart: int) -> str | None:
    """The node a rank ran on, from its progress record (None when it wrote none)."""
    try:
        record = RunFiles(run_dir).progress_record(rank, restart)
    except (OSError, ValueError):
        return None
    host = record.get("host") if record else None
    return str(host) if host else None


def _ended_by_slurm(ev: _Evidence) -> Diagnosis | None:
    """1. Slurm ended the whole job (time limit, preemption, node failure, cgroup OOM)."""
    job_rule = _JOB_STATES.get(ev.state_word)
    job_hit = next((h for h in ev.batch_hits if BY_NAME[h.rule].job_level and h.rule != "cancelled"), None)
    if job_hit and not job_rule:
        job_rule = job_hit.rule
    if not job_rule:
        return None
    return ev.verdict(BY_NAME[job_rule], job_hit if job_hit and job_hit.rule == job_rule else None, None,
                      0.95 if ev.state_word in _JOB_STATES else 0.9)


def _ended_by_watchdog(ev: _Evidence) -> Diagnosis | None:
    """1b. The watchdog ended a hang: no rank progressed for its timeout (hpclaunch/runtime/node/supervise.py)."""
    d = ev.d
    if d.restart is not None and _hung(d, RunFiles(ev.run_dir), d.restart, d.job_id):
        return d
    return None


def _ended_by_hpclaunch(ev: _Evidence) -> Diagnosis | None:
    """1c. An earlier restart that hpclaunch relaunched after a node was lost or a rank killed: its own record
    of what it saw (the logs of a lost node say nothing)."""
    rec = ev.recovery
    if not rec or rec.get("cause") not in ("node_lost", "killed"):
        return None
    d = ev.d
    d.cause, d.rank = str(rec["cause"]), rec.get("rank")
    d.node = str(rec.get("node") or "") or None
    d.title = str(rec.get("reason") or rec["cause"])
    d.confidence, d.layer = 0.9, "hardware" if rec["cause"] == "node_lost" else "resources"
    d.file = str(RunFiles(ev.run_dir).recoveries)
    d.hint = (f"hpclaunch relaunched the job inside its allocation from step {rec.get('step')} on {rec.get('nodes')}"
              + (f" without {d.node}" if rec["cause"] == "node_lost" and d.node else ""))
    return d


def _cancelled_by_state(ev: _Evidence) -> Diagnosis | None:
    """1d. Cancelled (scancel, `hpclaunch cancel`): what the ranks printed as they were stopped is no failure."""
    if ev.state_word != "CANCELLED":
        return None
    return _cancelled(ev.verdict(BY_NAME["cancelled"], _user_cancel(ev.batch_hits), None, 0.95), ev.run_dir)


def _best_cause(ev: _Evidence, strength: int) -> Diagnosis | None:
    """2 and 3. The best cause across the rank logs and the batch output (specific ones, then generic ones, then
    those only a warning names)."""
    causes = [h for h in ev.causes() if _strength(h) == strength]
    if not causes:
        return None
    generic = strength > 0
    hit = min(causes, key=ev.order)
    scan = ev.scan_of.get(hit.file)
    if scan is not None:
        rank: int | None = scan.rank
    else:
        rank = int(ev.root["rank"]) if ev.root and _line_rank(hit.line) is None else None
    confidence = 0.9 if not generic else (0.6 if hit.rule == "python_error" else 0.5) if strength == 1 else 0.4
    return ev.verdict(BY_NAME[hit.rule], hit, rank, confidence)


def _specific_cause(ev: _Evidence) -> Diagnosis | None:
    return _best_cause(ev, 0)


def _generic_cause(ev: _Evidence) -> Diagnosis | None:
    return _best_cause(ev, 1)


def _warned_cause(ev: _Evidence) -> Diagnosis | None:
    return _best_cause(ev, 2)


def _failed_first(ev: _Evidence) -> int | None:
    """The rank the launcher saw fail first: torchrun's root cause, else the first rank whose exit code its wrapper
    noted (msrun's workers)."""
    if ev.root:
        return int(ev.root["rank"])
    noted = [s for s in ev.scans if s.summary is not None]
    return min(noted, key=lambda s: (s.mtime, s.rank)).rank if noted else None


def _own_evidence(ev: _Evidence) -> Diagnosis | None:
    """4. The launcher names the first rank to fail, and only its exit code: what that rank printed itself (a
    collective timeout, a lost peer) is the cause, before the exit code is read as a signal or as silence."""
    rank = _failed_first(ev)
    if rank is None:
        return None
    own = next((s for s in ev.scans if s.rank == rank and s.secondary is not None), None)
    if own is None:
        return None
    hit = next((h for h in own.hits if h.rule == "collective_timeout"), own.secondary)
    assert hit is not None
    result = ev.verdict(BY_NAME[hit.rule], hit, rank, 0.5 if hit.rule == "collective_timeout" else 0.3)
    if hit.rule == "peer_failed":
        result.title, result.hint = f"rank {rank} lost a peer", _hint_peer(ev.d.job_id, None)
    return result


def _exit_summary(ev: _Evidence) -> Diagnosis | None:
    """5. Only the launcher's summary says why: an exit code read as a cause (-9: the OOM killer; 127: not found)."""
    hit = _first_cause([h for h in ev.batch_hits if _EXIT_SUMMARY.search(h.line)])
    noted = sorted((s for s in ev.scans if s.summary is not None), key=lambda s: (s.mtime, s.rank))
    if not hit and noted:
        hit = noted[0].summary
        assert hit is not None
        return ev.verdict(BY_NAME[hit.rule], hit, noted[0].rank, 0.3)
    if not hit:
        return None
    rank = int(ev.root["rank"]) if ev.root else None
    return ev.verdict(BY_NAME[hit.rule], hit, rank, 0.5)


def _cancelled_by_user(ev: _Evidence) -> Diagnosis | None:
    """6. Nothing failed on its own: a user or an administrator cancelled the job (not srun after a rank failed)."""
    cancel_hit = _user_cancel(ev.batch_hits)
    if not cancel_hit:
        return None
    return _cancelled(ev.verdict(BY_NAME["cancelled"], cancel_hit, None, 0.9), ev.run_dir)


def _silent_exit(ev: _Evidence) -> Diagnosis | None:
    """7. A rank exited without a word (killed) while the others waited."""
    if not ev.root:
        return None
    d, root = ev.d, ev.root
    rank = int(root["rank"])
    code = int(root["exit"])
    if code in (-9, 137):
        return ev.verdict(BY_NAME["host_oom"], None, rank, 0.5)
    if code == 127:
        return ev.verdict(BY_NAME["command_not_found"], None, rank, 0.5)
    quiet = next((s for s in ev.scans if s.rank == rank), None)
    d.file = quiet.file if quiet else None
    d.cause, d.rank, d.node = "exited", rank, root["host"]
    d.title = f"rank {rank} exited with code {code} without an error message"
    d.confidence = 0.2
    d.hint = (f"look at the last lines of its log (`hpclaunch logs {d.job_id} --rank {rank} --tail 50`); "
              "a signal or os._exit ends a rank silently")
    d.waiting_ranks = sorted(s.rank for s in ev.scans if s.rank != rank)
    d.suspicious = _suspicious([Path(quiet.file)] if quiet else [])
    return d


def _rank_cascade(ev: _Evidence) -> Diagnosis | None:
    """8. Only the cascade: ranks timed out in a collective (the suspects: the ranks that did not), or lost a peer."""
    waiting = [s for s in ev.scans if s.secondary is not None]
    if not waiting:
        return None
    timeouts = [s for s in waiting if any(h.rule == "collective_timeout" for h in s.hits)]
    if timeouts:  # the first rank that reported it; the ranks that did not are the suspects
        first = min(timeouts, key=lambda s: (s.mtime, s.rank))
        reported = next(h for h in first.hits if h.rule == "collective_timeout")
        return ev.verdict(BY_NAME["collective_timeout"], reported, first.rank, 0.4)
    silent = [s for s in ev.scans if s.secondary is None]
    suspect = min(silent, key=lambda s: (s.mtime, s.rank)) if silent else None
    hit = min(waiting, key=lambda s: (s.mtime, s.rank)).secondary
    result = ev.verdict(BY_NAME["peer_failed"], hit, suspect.rank if suspect else None, 0.3)
    result.title, result.hint = "ranks lost their peers", _hint_peer(ev.d.job_id, suspect)
    return result


def _batch_cascade(ev: _Evidence) -> Diagnosis | None:
    """9. Only the batch output shows the cascade: a collective timeout there is the cause, with its rank."""
    for name in ("collective_timeout", "msrun_worker_failed", "peer_failed"):
        hit = next((h for h in ev.batch_hits if h.rule == name and not _LAUNCHER_LINE.match(h.line)), None)
        if hit:
            result = ev.verdict(BY_NAME[name], hit, None, 0.4 if name == "collective_timeout" else 0.3)
            if name == "peer_failed":
                result.title, result.hint = "ranks lost their peers", _hint_peer(ev.d.job_id, None)
            return result
    return None


# The steps of `diagnose`, in order: the first that finds a cause gives the verdict.
_STEPS: tuple[Callable[[_Evidence], Diagnosis | None], ...] = (
    _ended_by_slurm, _ended_by_watchdog, _ended_by_hpclaunch, _cancelled_by_state, _specific_cause, _generic_cause,
    _warned_cause, _own_evidence, _exit_summary, _cancelled_by_user, _silent_exit, _rank_cascade, _batch_cascade)


def _unexplained(d: Diagnosis, ev: _Evidence) -> Diagnosis:
    """No step found a cause: a job that ended badly says "unknown" and quotes the lines most like an error (no
    cause is guessed); any other had no failure."""
    state, exit_code = d.state, d.exit_code
    rec = ev.recovery
    if rec:  # an earlier restart that hpclaunch relaunched: its reason is the one word there is
        d.cause, d.title, d.confidence = str(rec.get("cause")), str(rec.get("reason") or rec.get("cause")), 0.6
        d.rank, d.node = rec.get("rank"), rec.get("node") or None
        return d
    if state and state not in ("COMPLETED", "RUNNING", "PENDING") or (exit_code and exit_code != "0:0"):
        d.cause, d.confidence = "unknown", 0.0
        d.title = f"unknown: the job ended {state or ''} (exit {exit_code}) and no known error was found".replace(
            "  ", " ")
        files = [Path(s.file) for s in sorted(ev.scans, key=lambda s: (s.mtime, s.rank))[:8]]
        d.suspicious = _suspicious(RunFiles(ev.run_dir).job_outputs() + files)
        d.hint = (f"no rule knows this failure, so no cause is guessed: read the lines quoted under 'suspicious' and "
                  f"the last lines of each rank (`hpclaunch logs {d.job_id} --tail 50`)")
    return d


def _suspicious(files: list[Path], per_file: int = 3, shown: int = 8) -> list[dict[str, Any]]:
    """The last lines of each file that read like an error (an error, a failure, a refusal, a signal), newest
    first per file; the job script's own lines (hpclaunch: ...) and launcher summaries left out."""
    out: list[dict[str, Any]] = []
    for path in files:
        try:
            _, data = _read_ends(path, TAIL_FIRST)
        except OSError:
            continue
        found = []
        for raw in reversed(data.splitlines()):
            if _SUSPICIOUS.search(raw) and not raw.startswith(b"hpclaunch: job "):
                found.append(raw.decode("utf-8", "replace").strip()[:300])
                if len(found) == per_file:
                    break
        out += [{"line": line, "file": str(path)} for line in reversed(found)]
    return out[:shown]


def _user_cancel(batch_hits: list[Hit]) -> Hit | None:
    """Slurm's line of a cancel by a user or an administrator (not of a step srun cancelled after a rank
    failed: "STEP 56.0 ... CANCELLED AT")."""
    return next((h for h in batch_hits if h.rule == "cancelled" and " STEP " not in h.line), None)


def _local(files: RunFiles) -> bool:
    """A job of the local scheduler (this machine): no nodes to exclude."""
    return files.scheduler_state("local").is_dir()


def _cancelled(d: Diagnosis, run_dir: Path) -> Diagnosis:
    """A cancelled job's hint: the newest checkpoint and how to go on from it (`hpclaunch resume`: the job
    script queued again in its run directory, recorded as the job's continuation), or to start over."""
    newest = RunFiles(run_dir).latest_checkpoint()
    if newest is None:
        d.hint = ("nothing failed: the job was cancelled by its owner or an administrator; it wrote no checkpoint, "
                  f"so start it over (a new run directory): hpclaunch resume {d.job_id} --from-scratch")
        return d
    step, folder = newest
    d.checkpoint = str(folder)
    d.hint = (f"nothing failed: the job was cancelled by its owner or an administrator; its newest checkpoint is "
              f"step {step} ({folder}); to go on from it: hpclaunch resume {d.job_id}")
    return d


def _describe_collective(d: Diagnosis, lines: list[str]) -> None:
    """The timed-out operation, its sequence number and timeout, from the watchdog's (or HCCL's) lines."""
    d.operation = _first(_OP, lines)
    ms = _TIMEOUT_MS.search("\n".join(lines))
    if ms:
        value = next(g for g in ms.groups() if g is not None)
        d.timeout_ms = int(value) * (60_000 if ms.group(3) else 1)
    seq = _first(_SEQ, lines)
    d.seq_num = int(seq) if seq else None
    parts = [p for p in (d.operation, seq and f"SeqNum={seq}") if p]
    what = f"a collective operation ({', '.join(parts)})" if parts else "a collective operation"
    after = f" after {d.timeout_ms / 1000:g} s" if d.timeout_ms else ""
    d.title = f"{what} timed out{after}"
    stuck = _first(_WATCHDOG_STUCK, lines)
    if stuck and not d.operation:  # the heartbeat monitor: the watchdog thread itself hung in a NCCL/CUDA call
        d.title = f"the NCCL watchdog got stuck for {stuck} s (a NCCL/CUDA call hung)"


def _hint_peer(job_id: str, suspect: RankScan | None) -> str:
    where = f"rank {suspect.rank}" if suspect else "one rank"
    return f"{where} went away first; read its log and the job's output (`hpclaunch logs {job_id} --tail 50`)"
