"""Why did a job fail? Scan the end of every rank log of the latest restart and of the batch output
with one regular expression over bytes, classify the few matching lines (hpclaunch.logs.rules), and
pick the first failing rank: the one torchrun names as root cause, else a rank with a real error
(not the cascade that follows it) that stopped writing first.

What a rank printed itself wins over what its launcher concluded from its exit: torchrun's "Root Cause"
table (and DeepSpeed's "exits with return code") only give an exit code, so a collective timeout in the
root-cause rank's own log is the cause, with its operation, sequence number and timeout, before the
exit code is read as a signal (SIGABRT, SIGKILL) or as a rank that ended without a word."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.logs.read import read_tail_bytes
from hpclaunch.logs.rules import ALL_KEYS, BY_NAME, Rule, classify
from hpclaunch.state.runfiles import LogFile, RunFiles

if TYPE_CHECKING:
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
# A traceback's source lines ("  File ...", "    raise X(") are not the error: its last line is (and C++'s
# "  what():  ..." line, and torchrun's indented "exitcode : N", are).
_CODE_LINE = re.compile(rb"^(?>(?:\[rank\d+\]: ?)*)(?:[ \t]|File \")")
_NOT_CODE = (b"exitcode", b"what():", b"NVRM:")  # indented all the same: torchrun's table, C++'s abort, dmesg
# The job script's first line in every run: "hpclaunch: job J restart N on ..."
_RESTART_MARK = b"hpclaunch: job "
# A launcher's summary of an exit (torchrun's failure table and "failed (exitcode: N)", DeepSpeed's "exits with
# return code", srun's task line): an inference from the exit code, weaker than what a rank printed itself
_EXIT_SUMMARY = re.compile(
    r"exitcode\s*:|\(exitcode: -?\d+\)|Signal \d+ \(SIG\w+\) received by PID|return code = -?\d+"
    r"|[Ee]xit(?:ed with exit)? code")
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
# The program a "not found" line names: bash's "NAME: command not found", execve's and a script's "NAME: No such
# file or directory", sh's "1: NAME: not found", setsid's "failed to execute NAME"
_PROGRAM = re.compile(r"([^\s:]+): command not found|execve\(\): ([^:\n]+): No such file"
                      r"|line \d+: ([^\s:]+): No such file|^\S+: \d+: ([^\s:]+): not found|failed to execute ([^\s:]+)")
# Launcher and Slurm lines: they report an exit, not a lost peer
_LAUNCHER_LINE = re.compile(r"^(?:srun|slurmstepd|hpclaunch)\b")


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
    hits: list[Hit] = field(default_factory=list)


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
    node: str | None = None  # the node the error names (NCCL's host prefix, srun's task line, torchrun's host)
    operation: str | None = None  # a timed-out collective: OpType (ALLREDUCE, _ALLGATHER_BASE) or HCCL op
    timeout_ms: int | None = None  # the collective's timeout
    seq_num: int | None = None  # the timed-out collective's sequence number (torch's SeqNum / NCCL work)
    suspect_ranks: list[int] = field(default_factory=list)  # a collective timeout: ranks that did not report it
    first_failure: dict[str, str] | None = None  # torchrun's root cause: time, host, rank, exit
    waiting_ranks: list[int] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)
    checkpoint: str | None = None  # a cancelled job: the newest checkpoint, which a rerun resumes from

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
        code = _CODE_LINE.match(line) and not any(mark in line for mark in _NOT_CODE)
        if (skip_echo and _RANK_ECHO.match(line)) or code:
            continue
        rule = classify(line)
        if rule is not None:
            hits.append(Hit(rule.name, line.decode("utf-8", "replace").strip(), file, base + s))
    return _demote_wrappers(hits)


def _demote_wrappers(hits: list[Hit]) -> list[Hit]:
    """A `RuntimeError: ... HcclAllreduce, error code is 6` next to a collective timeout is that timeout
    surfacing in Python, and a `Fatal Python error: Aborted` the watchdog's abort: not causes of their own."""
    if not any(h.rule == "collective_timeout" for h in hits):
        return hits
    return [replace(h, rule="collective_timeout") if _wraps_timeout(h) else h for h in hits]


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
    scan.primary = _first_cause(hits)
    scan.secondary = next((h for h in hits if not BY_NAME[h.rule].primary), None)
    return scan


def _first_cause(hits: list[Hit]) -> Hit | None:
    """The first primary hit; a generic NCCL/HCCL failure gives way to the specific cause its `Last error:` names
    (no such interface, an InfiniBand error, out of memory)."""
    causes = [h for h in hits if BY_NAME[h.rule].primary]
    return next((h for h in causes if h.rule != "collective_error"), causes[0]) if causes else None


def _root_cause(data: bytes) -> dict[str, str] | None:
    found = [{k: v.decode() for k, v in m.groupdict().items()} for m in _ROOT_CAUSE.finditer(data)]
    return min(found, key=lambda d: d["time"]) if found else None


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
    shown = d.rank if d.rank is not None else 0
    without = f" --exclude {d.node}" if d.node and not _local(run) else ""
    d.hint = (f"the watchdog ended the job after {found.get('stalled_for', '?')} s without progress (timeout "
              f"{found.get('timeout', '?')} s); see where rank {shown} stopped: hpclaunch logs {job_id} --rank "
              f"{shown} --tail 50" + (f"; if node {d.node} is at fault, go on from the last checkpoint without it: "
                                      f"hpclaunch resume {job_id}{without}" if without else ""))
    return True


def diagnose(run_dir: Path, job_id: str, status: JobStatus | None = None) -> Diagnosis:
    """Why the job ended as it did, from the latest restart's rank logs, the batch output and the scheduler's state."""
    state = status.state if status else None
    exit_code = status.exit_code if status else None
    restarts, scans = _scan_ranks(run_dir)
    restart = restarts[-1] if restarts else None
    batch_hits, root = _scan_batch_output(run_dir)
    d = Diagnosis(job_id, state, exit_code, restart, len(scans), None, "no failure found",
                  first_failure=root, restarts=restarts)
    state_word = state.split()[0] if state else ""
    if state_word == "COMPLETED":
        d.title = "the job completed"
        return d
    found = _Evidence(d, run_dir, state_word, scans, batch_hits, root)
    for step in _STEPS:
        verdict = step(found)
        if verdict is not None:
            return verdict
    return _unexplained(d)


def _scan_ranks(run_dir: Path) -> tuple[list[int], list[RankScan]]:
    """(every restart, the scans of the latest one's rank logs): the latest restart is the one that ended the job."""
    all_files = RunFiles(run_dir).rank_logs()
    restarts = sorted({f.restart for f in all_files})
    restart = restarts[-1] if restarts else None
    return restarts, [scan_rank(f) for f in all_files if f.restart == restart]


def _scan_batch_output(run_dir: Path) -> tuple[list[Hit], dict[str, str] | None]:
    """The batch output's classified lines and torchrun's root cause, of the latest run only (a requeue appends)."""
    batch_hits: list[Hit] = []
    root: dict[str, str] | None = None
    for out in RunFiles(run_dir).job_outputs():
        base, data = _read_ends(out)
        start = data.rfind(_RESTART_MARK)  # only the latest run of a requeued job
        if start > 0:
            start = data.rfind(b"\n", 0, start) + 1
            base, data = base + start, data[start:]
        batch_hits += scan_bytes(data, base, str(out), skip_echo=True)
        root = _root_cause(data) or root
    return batch_hits, root


@dataclass
class _Evidence:
    """What the logs say, and the diagnosis the steps below fill from it (the first step that finds a cause wins)."""

    d: Diagnosis
    run_dir: Path
    state_word: str
    scans: list[RankScan]
    batch_hits: list[Hit]
    root: dict[str, str] | None
    hits_of: dict[str, list[Hit]] = field(init=False)
    rank_of: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.hits_of = {s.file: s.hits for s in self.scans}
        self.rank_of = {s.file: s.rank for s in self.scans}

    def verdict(self, rule: Rule, hit: Hit | None, rank: int | None) -> Diagnosis:
        """Name the cause: the rule, the line that shows it and the rank to blame (from the line when not given)."""
        d, root = self.d, self.root
        context = [hit.line] if hit else []
        if hit:
            context += [h.line for h in self.hits_of.get(hit.file, self.batch_hits) if h is not hit]
            if rank is None and not rule.job_level:
                rank = _line_rank(hit.line)
                rank = self.rank_of.get(hit.file) if rank is None else rank
        d.cause, d.title, d.rank = rule.name, rule.title, rank
        d.node = _first(_LINE_NODE, context) or (root["host"] if root and not rule.job_level else None)
        shown = rank if rank is not None else 0
        d.hint = rule.hint.replace("JOB", d.job_id).replace("--rank R", f"--rank {shown}")
        if rule.node_fault and _local(RunFiles(self.run_dir)):  # one machine: there is no other node to run on
            d.hint = d.hint.replace(" (--exclude NODE)", "").replace(" --exclude NODE", "")
        d.title = d.title.replace("NODE", d.node or "a node")
        d.hint = d.hint.replace("NODE", d.node or "<node>")
        if hit:
            d.error, d.file = hit.line, hit.file
        if not rule.job_level:
            d.waiting_ranks = sorted(s.rank for s in self.scans if s.rank != rank and s.primary is None)
        if rule.name == "command_not_found" and (program := _first(_PROGRAM, context)):
            d.title = f"the job could not find {program}"
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


def _ended_by_slurm(ev: _Evidence) -> Diagnosis | None:
    """1. Slurm ended the whole job (time limit, preemption, node failure, cgroup OOM)."""
    job_rule = _JOB_STATES.get(ev.state_word)
    job_hit = next((h for h in ev.batch_hits if BY_NAME[h.rule].job_level and h.rule != "cancelled"), None)
    if job_hit and not job_rule:
        job_rule = job_hit.rule
    if not job_rule:
        return None
    return ev.verdict(BY_NAME[job_rule], job_hit if job_hit and job_hit.rule == job_rule else None, None)


def _ended_by_watchdog(ev: _Evidence) -> Diagnosis | None:
    """1b. The watchdog ended a hang: no rank progressed for its timeout (hpclaunch/runtime/node/supervise.py)."""
    d = ev.d
    if d.restart is not None and _hung(d, RunFiles(ev.run_dir), d.restart, d.job_id):
        return d
    return None


def _cancelled_by_state(ev: _Evidence) -> Diagnosis | None:
    """1c. Cancelled (scancel, `hpclaunch cancel`): what the ranks printed as they were stopped is no failure."""
    if ev.state_word != "CANCELLED":
        return None
    return _cancelled(ev.verdict(BY_NAME["cancelled"], _user_cancel(ev.batch_hits), None), ev.run_dir)


def _rank_error(ev: _Evidence) -> Diagnosis | None:
    """2. A rank with a real error: torchrun's root-cause rank if it has one, else the one that stopped first."""
    failed = [s for s in ev.scans if s.primary is not None]
    if not failed:
        return None
    by_rank = {s.rank: s for s in failed}
    first = by_rank.get(int(ev.root["rank"])) if ev.root else None
    first = first or min(failed, key=lambda s: (s.mtime, s.rank))
    assert first.primary is not None
    return ev.verdict(BY_NAME[first.primary.rule], first.primary, first.rank)


def _batch_error(ev: _Evidence) -> Diagnosis | None:
    """3. The batch output names a cause (the launcher could not bind its port, a module was missing...)."""
    return _batch_primary(ev, summary=False)


def _own_evidence(ev: _Evidence) -> Diagnosis | None:
    """4. torchrun names the first rank to fail, and only its exit code: what that rank printed itself (a
    collective timeout, a lost peer) is the cause, before the exit code is read as a signal or as silence."""
    if not ev.root:
        return None
    rank = int(ev.root["rank"])
    own = next((s for s in ev.scans if s.rank == rank and s.secondary is not None), None)
    if own is None:
        return None
    hit = next((h for h in own.hits if h.rule == "collective_timeout"), own.secondary)
    assert hit is not None
    result = ev.verdict(BY_NAME[hit.rule], hit, rank)
    if hit.rule == "peer_failed":
        result.title, result.hint = f"rank {rank} lost a peer", _hint_peer(ev.d.job_id, None)
    return result


def _exit_summary(ev: _Evidence) -> Diagnosis | None:
    """5. Only the launcher's summary says why: an exit code read as a cause (-9: the OOM killer; 127: not found)."""
    return _batch_primary(ev, summary=True)


def _batch_primary(ev: _Evidence, *, summary: bool) -> Diagnosis | None:
    """The first cause in the batch output: among the launcher's exit summaries (`summary`) or its other lines."""
    hit = _first_cause([h for h in ev.batch_hits if bool(_EXIT_SUMMARY.search(h.line)) == summary])
    if not hit:
        return None
    rank = int(ev.root["rank"]) if ev.root else None
    return ev.verdict(BY_NAME[hit.rule], hit, rank)


def _cancelled_by_user(ev: _Evidence) -> Diagnosis | None:
    """6. Nothing failed on its own: a user or an administrator cancelled the job (not srun after a rank failed)."""
    cancel_hit = _user_cancel(ev.batch_hits)
    if not cancel_hit:
        return None
    return _cancelled(ev.verdict(BY_NAME["cancelled"], cancel_hit, None), ev.run_dir)


def _silent_exit(ev: _Evidence) -> Diagnosis | None:
    """7. A rank exited without a word (killed) while the others waited."""
    if not ev.root:
        return None
    d, root = ev.d, ev.root
    rank = int(root["rank"])
    code = int(root["exit"])
    if code in (-9, 137):
        return ev.verdict(BY_NAME["host_oom"], None, rank)
    if code == 127:
        return ev.verdict(BY_NAME["command_not_found"], None, rank)
    quiet = next((s for s in ev.scans if s.rank == rank), None)
    d.file = quiet.file if quiet else None
    d.cause, d.rank, d.node = "exited", rank, root["host"]
    d.title = f"rank {rank} exited with code {code} without an error message"
    d.hint = (f"look at the last lines of its log (`hpclaunch logs {d.job_id} --rank {rank} --tail 50`); "
              "a signal or os._exit ends a rank silently")
    d.waiting_ranks = sorted(s.rank for s in ev.scans if s.rank != rank)
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
        return ev.verdict(BY_NAME["collective_timeout"], reported, first.rank)
    silent = [s for s in ev.scans if s.secondary is None]
    suspect = min(silent, key=lambda s: (s.mtime, s.rank)) if silent else None
    hit = min(waiting, key=lambda s: (s.mtime, s.rank)).secondary
    result = ev.verdict(BY_NAME["peer_failed"], hit, suspect.rank if suspect else None)
    result.title, result.hint = "ranks lost their peers", _hint_peer(ev.d.job_id, suspect)
    return result


def _batch_cascade(ev: _Evidence) -> Diagnosis | None:
    """9. Only the batch output shows the cascade: a collective timeout there is the cause, with its rank."""
    for name in ("collective_timeout", "msrun_worker_failed", "peer_failed"):
        hit = next((h for h in ev.batch_hits if h.rule == name and not _LAUNCHER_LINE.match(h.line)), None)
        if hit:
            result = ev.verdict(BY_NAME[name], hit, None)
            if name == "peer_failed":
                result.title, result.hint = "ranks lost their peers", _hint_peer(ev.d.job_id, None)
            return result
    return None


# The steps of `diagnose`, in order: the first that finds a cause gives the verdict.
_STEPS: tuple[Callable[[_Evidence], Diagnosis | None], ...] = (
    _ended_by_slurm, _ended_by_watchdog, _cancelled_by_state, _rank_error, _batch_error, _own_evidence,
    _exit_summary, _cancelled_by_user, _silent_exit, _rank_cascade, _batch_cascade)


def _unexplained(d: Diagnosis) -> Diagnosis:
    """No step found a cause: a job that ended badly says so and where to read; any other had no failure."""
    state, exit_code = d.state, d.exit_code
    if state and state not in ("COMPLETED", "RUNNING", "PENDING") or (exit_code and exit_code != "0:0"):
        d.cause, d.title = "exited", f"the job ended {state or ''} (exit {exit_code}) with no known error"
        d.hint = f"read the job output and the last lines of each rank (`hpclaunch logs {d.job_id} --tail 50`)"
    return d


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
