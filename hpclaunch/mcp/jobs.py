"""The tools about submitted jobs: jobs, status, wait, logs, diagnose, report, compare, cancel."""

from __future__ import annotations

from typing import Annotated

import anyio.from_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from hpclaunch import api
from hpclaunch.mcp.answer import READ, answer, failed, respond, run

Job = Annotated[str, Field(description="a job id as submit returned it (a sweep's id, or one element: 12345_2)")]
LOG_LINES = 200  # logs: the last lines of each rank unless the call asks for another number
WAIT_S = 240.0  # wait: the longest a call blocks unless it asks for another timeout (agent hosts time calls out)


async def jobs(limit: Annotated[int, Field(description="the N newest jobs (0: all)", ge=0)] = 20) -> CallToolResult:
    """Recent jobs, each with its state, elapsed time, last metrics, timeline and goodput (`hpclaunch jobs
    --json`)."""
    return await respond(api.jobs, limit)


async def status(job: Annotated[str | None, Field(description="a job id; none: the 10 newest jobs")] = None
                 ) -> CallToolResult:
    """A job's state (PENDING, RUNNING, COMPLETED, FAILED, ...), pending reason in words, nodes, elapsed/limit,
    exit code, last metrics, the start-up timeline, the goodput ledger, retries and recoveries (`hpclaunch status
    JOB --json`). To wait for a change, call wait instead of calling status again and again."""
    return await respond(api.status, job)


async def wait(ctx: Context, job: Job,
               until: Annotated[str, Field(description="change: the job's next state (default); end: until it "
                                                       "ends; or a state: RUNNING, COMPLETED, ...")] = "change",
               timeout: Annotated[float, Field(description="seconds to wait at most (then outcome is timeout and "
                                                           "the job goes on)", ge=0, le=3600)] = WAIT_S
               ) -> CallToolResult:
    """Block until the job's state changes (or it reaches `until`, or ends), or until the timeout: one call instead
    of a polling loop, with progress notifications while it waits. Answers the state, the outcome ("reached",
    "ended": it ended otherwise, e.g. FAILED, or "timeout"), the states seen, reason and exit code (`hpclaunch
    wait JOB --until UNTIL --json`). After FAILED, call diagnose."""
    def progress(s: api.JobStatus, waited: float) -> None:
        message = f"job {job}: {s.state}" + (f" ({s.reason})" if s.reason and not s.finished else "")
        anyio.from_thread.run(ctx.report_progress, min(waited, timeout), timeout, message)

    try:
        return answer(await run(api.wait, job, until, timeout, on_poll=progress))
    except Exception as exc:  # every failure becomes an error result
        return failed(exc)


async def logs(job: Job,
               tail: Annotated[int | None, Field(description=f"the last N lines of each rank (default {LOG_LINES}; "
                                                             "null: every line)", ge=1)] = LOG_LINES,
               grep: Annotated[str | None, Field(description="only lines matching this regular expression")] = None,
               rank: Annotated[int | None, Field(description="only this rank", ge=0)] = None,
               restart: Annotated[int | None, Field(description="only this restart (default: all)", ge=0)] = None
               ) -> CallToolResult:
    """A job's output, every rank and restart merged in order: a list of {rank, restart, line} (`hpclaunch logs
    JOB --json`, with --tail, --grep, --rank, --restart)."""
    return await respond(api.logs, job, rank=rank, restart=restart, tail=tail, grep=grep)


async def diagnose(job: Job,
                   restart: Annotated[int | None, Field(description="that restart's evidence (an earlier one: why it "
                                                                    "ended); default: the latest", ge=0)] = None
                   ) -> CallToolResult:
    """Why a job failed: the cause with its confidence and the other candidates, the first failing rank, the node,
    the first real error (not the secondary errors of the ranks that waited), the log file and what to do; "unknown"
    with the most suspicious lines when no rule knows the failure; a job that completed after recovering inside its
    allocation: each recovery (`hpclaunch logs JOB --diagnose [--restart N] --json`)."""
    return await respond(api.diagnose, job, restart=restart)


async def report(job: Job) -> CallToolResult:
    """A run's summary: steps, losses, throughput, the goodput ledger, checkpoints, the start-up timeline, health,
    stragglers, CPU and device usage, and the plots written (`hpclaunch report JOB --json`)."""
    return await respond(api.report, job)


async def compare(job_a: Job,
                  job_b: Annotated[str | None, Field(description="the second job; none when job_a is a sweep (its "
                                                                  "elements are compared)")] = None,
                  tolerance: Annotated[float | None, Field(description="an error result when the largest absolute "
                                                                       "loss difference is above it")] = None
                  ) -> CallToolResult:
    """The per-step loss difference of two runs (B - A), its largest and mean absolute value, the throughput ratio
    and what differs in their configs and environments (`hpclaunch compare JOB_A JOB_B --json`)."""
    try:
        done = await run(api.compare, job_a, job_b)
    except Exception as exc:  # every failure becomes an error result
        return failed(exc)
    try:
        done.check(tolerance)
    except Exception as exc:  # above the tolerance: the error, with the comparison
        return failed(exc, done)
    return answer(done)


async def cancel(jobs: Annotated[list[str], Field(description="job ids; a sweep's id cancels the whole sweep",
                                                  min_length=1)]) -> CallToolResult:
    """Cancel jobs (every step and the batch script); a job that has already ended is left alone and said so
    (`hpclaunch cancel JOB... --json`). Every id is checked before anything is cancelled."""
    return await respond(api.cancel, jobs)


def register(server: MCPServer) -> None:
    for tool in (jobs, status, wait, logs, diagnose):
        server.add_tool(tool, annotations=READ)
    server.add_tool(report, annotations=ToolAnnotations(destructive_hint=False))  # writes its plots
    server.add_tool(compare, annotations=ToolAnnotations(destructive_hint=False))  # writes its plot
    server.add_tool(cancel, annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
