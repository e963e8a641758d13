"""Parse what Slurm's commands print into hpclaunch's `JobStatus`: pure functions, standard library only.

Covered (each tested against recorded real outputs in tests/fixtures/slurm/, see SOURCES.md there):

- `squeue --noheader --array --format=SQUEUE_FORMAT` text (what `SlurmScheduler.status` asks for);
- `sacct --parsable2` text, with its header line or with the field names given;
- `scontrol show job`, one-liner (`--oneliner`) or multi-line;
- `squeue --json` / `scontrol show job --json` and `sacct --json` of Slurm 21.08 to 23.11, and slurmrestd's jobs of
  22.05 and 26.05 (tests/fixtures/slurmrestd/: its job is squeue's, its slurmdbd job sacct's): plain numbers,
  `{"set", "infinite", "number"}` wrappers (23.02+), `job_state` as a string or a list (23.11+), exit codes
  as raw wait statuses (squeue 21.08/22.05) or `{"status", "return_code", "signal"}` objects.

Every command yields `SlurmJob` records (one per job, array task or het component); `select` picks the
records for the ids hpclaunch asked about: an array's or a het job's own id stands for all its tasks or
components, summed up as one status.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpclaunch.schedulers.base import JobStatus, clock
from hpclaunch.schedulers.slurm import reasons

# squeue fields: %i id as shown (7_2, 16+1), %A the job's own id, %F array job id, %K array task id,
# %T state, %r reason, %N nodes, %M elapsed, %l time limit, %S start time (a pending job's: the scheduler's
# estimate, N/A when it has none).
SQUEUE_FORMAT = "%i|%A|%F|%K|%T|%r|%N|%M|%l|%S"
SQUEUE_FIELDS = (
    "JobID",
    "JobIDRaw",
    "ArrayJobID",
    "ArrayTaskID",
    "State",
    "Reason",
    "NodeList",
    "Elapsed",
    "Timelimit",
    "Start",
)
SACCT_FIELDS = "JobID,JobIDRaw,State,ExitCode,NodeList,Elapsed,Timelimit,Reason,End"

# Slurm's state names (base states, the flags squeue/sacct print instead of the base state, and squeue's
# short codes) -> hpclaunch's states. Not listed: UNKNOWN.
SLURM_STATES: dict[str, str] = {
    "PENDING": "PENDING",
    "PD": "PENDING",
    "REQUEUED": "PENDING",
    "RQ": "PENDING",  # goes back to the queue and runs again
    "REQUEUE_HOLD": "PENDING",
    "RH": "PENDING",
    "REQUEUE_FED": "PENDING",
    "RF": "PENDING",
    "SPECIAL_EXIT": "PENDING",
    "SE": "PENDING",  # requeued and held after a special exit code
    "RESV_DEL_HOLD": "PENDING",
    "RD": "PENDING",
    "RUNNING": "RUNNING",
    "R": "RUNNING",
    "CONFIGURING": "RUNNING",
    "CF": "RUNNING",  # allocated, nodes booting
    "POWER_UP_NODE": "RUNNING",
    "RESIZING": "RUNNING",
    "RS": "RUNNING",
    "SIGNALING": "RUNNING",
    "SI": "RUNNING",
    "SUSPENDED": "SUSPENDED",
    "S": "SUSPENDED",
    "STOPPED": "SUSPENDED",
    "ST": "SUSPENDED",
    "COMPLETING": "COMPLETING",
    "CG": "COMPLETING",  # ended; the nodes are still cleaning up
    "STAGE_OUT": "COMPLETING",
    "SO": "COMPLETING",
    "UPDATE_DB": "COMPLETING",
    "COMPLETED": "COMPLETED",
    "CD": "COMPLETED",
    "FAILED": "FAILED",
    "F": "FAILED",
    "LAUNCH_FAILED": "FAILED",
    "RECONFIG_FAIL": "FAILED",
    "CANCELLED": "CANCELLED",
    "CA": "CANCELLED",
    "REVOKED": "CANCELLED",
    "RV": "CANCELLED",  # a federation sibling started it elsewhere
    "TIMEOUT": "TIMEOUT",
    "TO": "TIMEOUT",
    "PREEMPTED": "PREEMPTED",
    "PR": "PREEMPTED",
    "NODE_FAIL": "NODE_FAIL",
    "NF": "NODE_FAIL",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY",
    "OOM": "OUT_OF_MEMORY",
    "BOOT_FAIL": "BOOT_FAIL",
    "BF": "BOOT_FAIL",
    "DEADLINE": "DEADLINE",
    "DL": "DEADLINE",
}
_AGAIN = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
_ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)
# how one status sums up an array's tasks or a het job's components: the first state found wins
_SUMMARY_ORDER = (
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "PENDING",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "FAILED",
    "BOOT_FAIL",
    "TIMEOUT",
    "DEADLINE",
    "PREEMPTED",
    "CANCELLED",
    "COMPLETED",
    "UNKNOWN",
)
_NONE = frozenset({"", "None", "none", "(null)", "n/a", "N/A", "None assigned", "NONE"})
_NO_LIMIT = frozenset({"Partition_Limit", "NOT_SET", "N/A", ""})
_INFINITE = frozenset({"UNLIMITED", "INFINITE"})
_NO_VAL = 0xFFFFFFFE  # Slurm's NO_VAL; 0xFFFFFFFF is INFINITE (21.08/22.05 plain numbers)


@dataclass(frozen=True)
class SlurmJob:
    """One job, array task or het component as one Slurm command printed it, mapped to hpclaunch's terms."""

    job_id: str  # as Slurm shows it: 123, 123_4, 123_[5-9] (pending tasks), 123+1 (het component)
    raw_id: str  # the job's own numeric id (JobIDRaw / %A / job_id)
    state: str  # hpclaunch's state (SLURM_STATES)
    slurm_state: str  # what Slurm printed, e.g. "CANCELLED by 0" or "RUNNING,COMPLETING"
    reason: str | None = None
    exit_code: str | None = None  # "code:signal"
    nodes: str | None = None
    elapsed: str | None = None  # Slurm's clock text: 0:07, 1:02:03, 2-00:00:00
    time_limit: str | None = None  # the same, or UNLIMITED
    array_job_id: str | None = None
    array_task_id: str | None = None  # "4", or "5-9" for tasks still pending together
    het_job_id: str | None = None
    het_job_offset: str | None = None
    submitted: int = 0  # submit time (JSON only): picks the newest of a requeued job's records
    end: str | None = None  # end time as Slurm prints it (2026-11-23T06:44:07), once it ended
    start: str | None = None  # a pending job's expected start (squeue's %S: the backfill scheduler's estimate)

    def status(self, job_id: str | None = None, source: str = "") -> JobStatus:
        return JobStatus(
            job_id or self.job_id,
            self.state,
            self.reason,
            self.exit_code,
            self.nodes,
            self.elapsed,
            self.time_limit,
            source=source,
            ended=self.end if self.state in _ENDED else None,
            reason_text=reasons.in_words(self.reason, job_id or self.job_id),
            expected_start=self.start if self.state == "PENDING" else None,
        )


# --- values -------------------------------------------------------------------------------------------------


def map_state(raw: str | Sequence[str] | None) -> str:
    """Slurm's state -> hpclaunch's. Takes "CANCELLED by 1000", "COMPLETED+" (sacct's truncation), squeue's
    short codes, and JSON lists (base state first, then flags: ["CANCELLED", "REQUEUED"] -> PENDING, since the
    job runs again; ["FAILED", "COMPLETING"] -> FAILED, the outcome is known)."""
    if raw is None:
        return "UNKNOWN"
    names = [raw] if isinstance(raw, str) else list(raw)
    names = [n.split()[0].rstrip("+").upper() for n in names if n and n.strip()]
    if not names:
        return "UNKNOWN"
    if any(n in _AGAIN for n in names):
        return "PENDING"
    states = [SLURM_STATES.get(n, "UNKNOWN") for n in names]
    base = states[0]
    if base in _ENDED:
        return base
    for flag in states[1:]:
        if flag in ("COMPLETING", "SUSPENDED") or flag in _ENDED:
            return flag
    return base


def reason_code(raw: str | None) -> str | None:
    """The reason as squeue %r prints it: "(JobHeldUser)" -> "JobHeldUser"; scontrol's
    "ReqNodeNotAvail,_UnavailableNodes:n1" -> "ReqNodeNotAvail, UnavailableNodes:n1"; None/(null) -> None."""
    if raw is None:
        return None
    text = raw.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    text = text.replace("_", " ").strip()  # scontrol writes spaces as "_"; no reason code has one
    return None if text in _NONE else text


def _none(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value in _NONE else value


_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$|^(\d+)-(\d+)$")


def duration(text: str | None) -> str | None:
    """Any of Slurm's duration texts ("00:01:17", "1:17", "2-00:00:00", "UNLIMITED", "Partition_Limit") in
    squeue's form ("1:17", "2-00:00:00", "UNLIMITED"); None when the job has no limit of its own."""
    if text is None:
        return None
    text = text.strip()
    if text in _INFINITE:
        return "UNLIMITED"
    if text in _NO_LIMIT or text in _NONE:
        return None
    m = _DURATION.match(text)
    if not m:
        return text
    if m.group(5) is not None:  # days-hours
        return clock(int(m.group(5)) * 86400 + int(m.group(6)) * 3600)
    days, hours, minutes, secs = (int(g) if g else 0 for g in m.group(1, 2, 3, 4))
    return clock(days * 86400 + hours * 3600 + minutes * 60 + secs)


def _num(value: Any) -> int | float | None:
    """A JSON number, plain (21.08/22.05) or wrapped {"set", "infinite", "number"} (23.02+);
    None when not set; inf when infinite."""
    if isinstance(value, Mapping):
        if value.get("infinite"):
            return float("inf")
        if not value.get("set", True):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def json_number(value: Any) -> int | float | None:
    """A number of Slurm's JSON (squeue/sacct --json, slurmrestd), plain or a {"set", "infinite", "number"} wrapper:
    None when not set, inf when infinite."""
    return _num(value)


def _id(value: Any, zero: bool = False) -> str | None:
    """An id field; None or not set mean "none", and so does 0 for a parent id (array job, het job) but not
    for a task id or het offset (zero=True)."""
    n = _num(value)
    if n is None or n == float("inf") or (n == 0 and not zero):
        return None
    return str(int(n))


def _task_string(task: str) -> str:
    """sacct --json 22.05 gives pending array tasks as a hex bitmap: "0x7" -> "0-2"; 23.02 on (slurmrestd v0.0.40
    on, squeue --json) as the array's text with its limit, "1-3%1" -> "1-3"; others pass as they are."""
    task = task.split("%", 1)[0]
    if not task.startswith("0x"):
        return task
    try:
        bits = int(task, 16)
    except ValueError:
        return task
    ranges: list[str] = []
    i = 0
    while bits >> i:
        if bits >> i & 1:
            j = i
            while bits >> (j + 1) & 1:
                j += 1
            ranges.append(str(i) if i == j else f"{i}-{j}")
            i = j + 1
        else:
            i += 1
    return ",".join(ranges) or task


def _minutes(value: Any) -> str | None:
    n = _num(value)
    if n is None or (isinstance(n, int) and n == _NO_VAL):
        return None
    if n == float("inf") or n >= 0xFFFFFFFF:
        return "UNLIMITED"
    return clock(int(n) * 60)


def wait_status(status: int) -> str:
    """A raw wait status (squeue --json 21.08/22.05 exit_code) as "code:signal": 768 -> "3:0", 15 -> "0:15"."""
    if status & 0x7F:
        return f"0:{status & 0x7F}"
    return f"{(status >> 8) & 0xFF}:0"


def _exit_code(value: Any) -> str | None:
    if isinstance(value, Mapping) and ("return_code" in value or "status" in value):
        code = _num(value.get("return_code"))
        signal = value.get("signal") or {}
        sig = _num(signal.get("id", signal.get("signal_id"))) if isinstance(signal, Mapping) else None
        return f"{int(code or 0)}:{int(sig or 0)}"
    n = _num(value)
    return None if n is None or n == float("inf") else wait_status(int(n))


def _display_id(
    raw: str, array_job: str | None, array_task: str | None, het_job: str | None, het_offset: str | None
) -> str:
    if array_job and array_task is not None:
        return f"{array_job}_{array_task}" if array_task.isdigit() else f"{array_job}_[{array_task}]"
    if het_job and het_offset is not None:
        return f"{het_job}+{het_offset}"
    return raw


def _split_display(job_id: str) -> tuple[str | None, str | None, str | None, str | None]:
    """123_4 -> array 123 task 4; 123_[5-9] -> array 123 tasks 5-9; 123+1 -> het 123 offset 1."""
    if "_" in job_id:
        array_job, task = job_id.split("_", 1)
        return array_job, task.strip("[]"), None, None
    if "+" in job_id:
        het_job, offset = job_id.split("+", 1)
        return None, None, het_job, offset
    return None, None, None, None


# --- text outputs -------------------------------------------------------------------------------------------


def _rows(text: str, fields: Sequence[str] | None) -> Iterable[dict[str, str]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if fields is None:
        if not lines:
            return
        fields, lines = lines[0].split("|"), lines[1:]
    for line in lines:
        parts = line.split("|")
        if len(parts) == len(fields):
            yield dict(zip(fields, parts, strict=True))


def _row_job(row: Mapping[str, str], shown: str, raw: str,
             *parents: str | None) -> SlurmJob:
    """A squeue or sacct text row (fields named as sacct names them) as a SlurmJob; parents: array job, array
    task, het job, het offset."""
    state = row.get("State", "").strip()
    array_job, array_task, het_job, het_offset = (*parents, None, None, None, None)[:4]
    return SlurmJob(
        shown,
        raw,
        map_state(state),
        state,
        reason_code(row.get("Reason")),
        _none(row.get("ExitCode")),
        _none(row.get("NodeList")),
        duration(row.get("Elapsed")),
        duration(row.get("Timelimit")),
        array_job,
        array_task,
        het_job,
        het_offset,
        end=_when(row.get("End")),
        start=_when(row.get("Start")),
    )


def _when(value: str | None) -> str | None:
    """Slurm's end time text, or None for Unknown/None (not ended yet)."""
    value = _none(value.strip() if value else None)
    return value if value and value[:1].isdigit() else None


def parse_squeue_text(text: str, fields: Sequence[str] = SQUEUE_FIELDS) -> list[SlurmJob]:
    """`squeue --noheader --array --format=SQUEUE_FORMAT` (fields named as in SQUEUE_FIELDS; a text without the
    last field, %S, as hpclaunch asked before it wanted the start estimate, is read as well)."""
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if fields is SQUEUE_FIELDS and first.count("|") == len(fields) - 2:
        fields = fields[:-1]
    jobs = []
    for row in _rows(text, fields):
        shown = row["JobID"].strip()
        array_job, array_task, het_job, het_offset = _split_display(shown)
        if row.get("ArrayJobID") and _none(row.get("ArrayTaskID")):
            array_job, array_task = row["ArrayJobID"].strip(), row["ArrayTaskID"].strip()
        raw = row.get("JobIDRaw", shown).strip() or shown
        jobs.append(_row_job(row, shown, raw, array_job, array_task, het_job, het_offset))
    return jobs


def parse_sacct_text(text: str, fields: Sequence[str] | None = None) -> list[SlurmJob]:
    """`sacct --parsable2` with its header line (fields=None) or `--noheader` with the field names given.
    Steps (123.batch, 123+0.0) are skipped: the job's own line carries its state."""
    jobs = []
    for row in _rows(text, fields):
        shown = (row.get("JobID") or row.get("JobIDRaw") or "").strip()
        raw = (row.get("JobIDRaw") or shown).strip()
        if not shown or "." in shown or "." in raw:
            continue
        array_job, array_task, het_job, het_offset = _split_display(shown)
        jobs.append(_row_job(row, shown, raw, array_job, array_task, het_job, het_offset))
    return jobs


_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_/:]*)=")
_RECORD = re.compile(r"(?m)^[ \t]*(?=JobId=)")


def scontrol_fields(record: str) -> dict[str, str]:
    """`JobId=1 JobName=a b ...` -> {"JobId": "1", "JobName": "a b", ...}: a value runs to the next `Key=`."""
    keys = list(_KEY.finditer(record))
    out: dict[str, str] = {}
    for m, nxt in zip(keys, [*keys[1:], None], strict=True):
        out.setdefault(m.group(1), record[m.end() : nxt.start() if nxt else len(record)].strip())
    return out


def parse_scontrol(text: str) -> list[SlurmJob]:
    """`scontrol show job` output, one line per job (--oneliner) or several (records start with JobId=)."""
    jobs = []
    for record in _RECORD.split(text):
        if not record.strip().startswith("JobId="):
            continue
        f = scontrol_fields(record)
        raw = f["JobId"]
        array_job, array_task = _none(f.get("ArrayJobId")), _none(f.get("ArrayTaskId"))
        het_job, het_offset = _none(f.get("HetJobId")), _none(f.get("HetJobOffset"))
        state = f.get("JobState", "")
        jobs.append(
            SlurmJob(
                _display_id(raw, array_job, array_task, het_job, het_offset),
                raw,
                map_state(state),
                state,
                reason_code(f.get("Reason")),
                _none(f.get("ExitCode")),
                _none(f.get("NodeList")),
                duration(f.get("RunTime")),
                duration(f.get("TimeLimit")),
                array_job,
                array_task,
                het_job,
                het_offset,
                end=_when(f.get("EndTime")),
            )
        )
    return jobs


# --- JSON outputs -------------------------------------------------------------------------------------------


def _load(data: str | Mapping[str, Any]) -> Mapping[str, Any]:
    return json.loads(data) if isinstance(data, str) else data


def _parents(array_job_v: Any, task_v: Any, tasks: Any, het_job_v: Any, offset_v: Any) -> tuple[str | None, ...]:
    """(array job, array task, het job, het offset) from JSON values; pending tasks as "0-2"."""
    array_job = _id(array_job_v)
    array_task = _id(task_v, zero=True) if array_job else None
    if array_job and array_task is None and tasks:
        array_task = _task_string(str(tasks))
    het_job = _id(het_job_v)
    het_offset = _id(offset_v, zero=True) if het_job else None
    if het_job and het_offset is None:
        het_offset = "0"
    return array_job, array_task, het_job, het_offset


def parse_squeue_json(data: str | Mapping[str, Any], now: float | None = None) -> list[SlurmJob]:
    """`squeue --json` (or `scontrol show job --json`, slurmrestd's jobs), Slurm 21.08 to 26.05. Elapsed is computed
    from the start time: up to `now` (default: the clock) while the job runs, to its end time once it ended."""
    now = time.time() if now is None else now
    jobs = []
    for j in _load(data).get("jobs", []):
        raw = str(j["job_id"])
        array_job, array_task, het_job, het_offset = _parents(
            j.get("array_job_id"),
            j.get("array_task_id"),
            j.get("array_task_string"),
            j.get("het_job_id"),
            j.get("het_job_offset"),
        )
        raw_state = j.get("job_state")
        state = map_state(raw_state)
        start, end = _num(j.get("start_time")) or 0, _num(j.get("end_time")) or 0
        if state == "PENDING" or not start:
            elapsed: str | None = clock(0)
        elif state in ("RUNNING", "SUSPENDED"):
            elapsed = clock(now - start)
        else:
            elapsed = clock((end or now) - start)
        jobs.append(
            SlurmJob(
                _display_id(raw, array_job, array_task, het_job, het_offset),
                raw,
                state,
                ",".join(raw_state) if isinstance(raw_state, list) else str(raw_state),
                reason_code(j.get("state_reason")),
                _exit_code(j.get("exit_code")),
                _none(j.get("nodes")),
                elapsed,
                _minutes(j.get("time_limit")),
                array_job,
                array_task,
                het_job,
                het_offset,
                int(_num(j.get("submit_time")) or 0),
                start=_local_time(start) if state == "PENDING" and start else None,
            )
        )
    return jobs


def _local_time(epoch: float) -> str:
    """An epoch as squeue prints a time (local time, 2026-11-29T03:10:00)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def parse_sacct_json(data: str | Mapping[str, Any]) -> list[SlurmJob]:
    """`sacct --json` (slurmrestd's slurmdbd jobs), Slurm 21.08 to 26.05."""
    jobs = []
    for j in _load(data).get("jobs", []):
        raw = str(j["job_id"])
        array = j.get("array") or {}
        het = j.get("het") or {}
        array_job, array_task, het_job, het_offset = _parents(
            array.get("job_id"), array.get("task_id"), array.get("task"), het.get("job_id"), het.get("job_offset")
        )
        st = j.get("state") or {}
        raw_state = st.get("current")
        t = j.get("time") or {}
        jobs.append(
            SlurmJob(
                _display_id(raw, array_job, array_task, het_job, het_offset),
                raw,
                map_state(raw_state),
                ",".join(raw_state) if isinstance(raw_state, list) else str(raw_state),
                reason_code(st.get("reason")),
                _exit_code(j.get("exit_code")),
                _none(j.get("nodes")),
                clock(_num(t.get("elapsed"))),
                _minutes(t.get("limit")),
                array_job,
                array_task,
                het_job,
                het_offset,
                int(_num(t.get("submission")) or 0),
            )
        )
    return jobs


# --- from records to the statuses asked for -----------------------------------------------------------------


def _summary(job_id: str, group: list[SlurmJob], source: str) -> JobStatus:
    def rank(j: SlurmJob) -> int:
        return _SUMMARY_ORDER.index(j.state) if j.state in _SUMMARY_ORDER else len(_SUMMARY_ORDER)

    lead = min(group, key=rank)  # min keeps the first of equals: Slurm's own order
    nodes: list[str] = []
    for j in group:
        if j.nodes and j.nodes not in nodes:
            nodes.append(j.nodes)
    return JobStatus(
        job_id,
        lead.state,
        lead.reason,
        lead.exit_code,
        ",".join(nodes) or None,
        lead.elapsed,
        lead.time_limit,
        source=source,
        ended=max((j.end for j in group if j.end), default=None) if lead.state in _ENDED else None,
        reason_text=reasons.in_words(lead.reason, job_id),
        expected_start=lead.start if lead.state == "PENDING" else None,
    )


def select(jobs: Iterable[SlurmJob], ids: Sequence[str], source: str) -> dict[str, JobStatus]:
    """The status of each id found among `jobs`: an id as Slurm shows it (123, 123_4, 123+1) gives that record;
    an array's or het job's own id gives all its tasks or components summed up (the most active state wins:
    running, then pending, then failures, cancelled, completed); a task's own raw id gives that task.
    Of several records for one id (a requeued job in sacct --json), the newest submitted wins."""
    by_shown: dict[str, SlurmJob] = {}
    by_raw: dict[str, SlurmJob] = {}
    groups: dict[str, list[SlurmJob]] = {}
    for j in jobs:
        old = by_shown.get(j.job_id)
        if old is None or j.submitted >= old.submitted:
            by_shown[j.job_id] = j
    for j in by_shown.values():
        by_raw.setdefault(j.raw_id, j)
        for parent in (j.array_job_id, j.het_job_id):
            if parent:
                groups.setdefault(parent, []).append(j)
    out: dict[str, JobStatus] = {}
    for want in ids:
        if want in by_shown:
            out[want] = by_shown[want].status(want, source)
        elif want in groups:
            out[want] = _summary(want, groups[want], source)
        elif want in by_raw:
            out[want] = by_raw[want].status(want, source)
    return out
