"""The tools of `hpclaunch mcp` about submitted jobs: jobs, status, logs, diagnose, report, compare, cancel."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from hpclaunch.cli.mcptools import READ, Job, cli, result

LOG_LINES = 200  # logs: the last lines of each rank unless the call asks for another number


def jobs(limit: Annotated[int, Field(description="the N newest jobs (0: all)", ge=0)] = 20) -> CallToolResult:
    """Recent jobs, each with its state, elapsed time, last metrics, timeline and goodput (`hpclaunch jobs
    --json`)."""
    return result(cli("jobs", limit=limit))


def status(job: Annotated[str | None, Field(description="a job id; none: the 10 newest jobs")] = None
           ) -> CallToolResult:
    """A job's state (PENDING, RUNNING, COMPLETED, FAILED, ...), pending reason in words, nodes, elapsed/limit,
    exit code, last metrics, the start-up timeline, the goodput ledger, retries and recoveries (`hpclaunch status
    JOB --json`). Call it again to follow a job until `finished` is true."""
    return result(cli("status", positional=[job] if job else []))


def logs(job: Job,
         tail: Annotated[int | None, Field(description=f"the last N lines of each rank (default {LOG_LINES}; "
                                                       "null: every line)", ge=1)] = LOG_LINES,
         grep: Annotated[str | None, Field(description="only lines matching this regular expression")] = None,
         rank: Annotated[int | None, Field(description="only this rank", ge=0)] = None,
         restart: Annotated[int | None, Field(description="only this restart (default: all)", ge=0)] = None
         ) -> CallToolResult:
    """A job's output, every rank and restart merged in order: a list of {rank, restart, line} (`hpclaunch logs
    JOB --json`, with --tail, --grep, --rank, --restart)."""
    return result(cli("logs", positional=[job], tail=tail, grep=grep, rank=rank, restart=restart), lines=True)


def diagnose(job: Job) -> CallToolResult:
    """Why a job failed: the first failing rank, the node, the first real error (not the secondary errors of the
    ranks that waited), the log file and what to do (`hpclaunch logs JOB --diagnose --json`)."""
    return result(cli("logs", positional=[job], diagnose=True))


def report(job: Job) -> CallToolResult:
    """A job's summary from its metrics: steps, losses, throughput, checkpoints, timeline, goodput, node health,
    stragglers, CPU and device usage, and the plots written (`hpclaunch report JOB --json`)."""
    return result(cli("report", positional=[job]))


def compare(job_a: Job, job_b: Annotated[str | None, Field(description="the second job; none when job_a is a "
                                                                         "sweep (its elements are compared)")] = None,
            tolerance: Annotated[float | None, Field(description="an error result when the largest absolute loss "
                                                                 "difference is above it")] = None) -> CallToolResult:
    """The per-step loss difference of two runs (B - A), its largest and mean absolute value, the throughput ratio
    and what differs in their configs and environments (`hpclaunch compare JOB_A JOB_B --json`)."""
    return result(cli("compare", positional=[job_a, *([job_b] if job_b else [])], tolerance=tolerance))


def cancel(jobs: Annotated[list[str], Field(description="job ids; a sweep's id cancels the whole sweep",
                                            min_length=1)]) -> CallToolResult:
    """Cancel jobs (every step and the batch script); a job that has already ended is left alone and said so
    (`hpclaunch cancel JOB... --json`). Every id is checked before anything is cancelled."""
    return result(cli("cancel", positional=jobs))


def register(server: MCPServer) -> None:
    for tool in (jobs, status, logs, diagnose):
        server.add_tool(tool, annotations=READ)
    server.add_tool(report, annotations=ToolAnnotations(destructive_hint=False))  # writes its plots
    server.add_tool(compare, annotations=ToolAnnotations(destructive_hint=False))  # writes its plot
    server.add_tool(cancel, annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
