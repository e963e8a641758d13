"""hpclaunch wait JOB [--until STATE] [--timeout S]: block until the job gets there (hpclaunch/api/waiting.py);
the exit code says how it went."""

from __future__ import annotations

import click

from hpclaunch import api
from hpclaunch.api.waiting import UNTIL
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option


@click.command("wait", epilog=examples(
    "hpclaunch wait 12345  # until it ends: exit 0 when COMPLETED",
    "hpclaunch wait 12345 --until RUNNING --timeout 600",
    "hpclaunch wait 12345 --until change --json  # its next state",
    "hpclaunch wait 12345 && hpclaunch report 12345"))
@click.argument("job", shell_complete=complete.job)
@click.option("--until", "until", default="end", show_default=True, metavar="STATE",
              help=f"what to wait for: {', '.join(UNTIL)} (end: any end; change: the next change of state)")
@click.option("--timeout", type=click.FloatRange(0), default=None, metavar="S",
              help="give up after S seconds (exit 124); default: no limit")
@click.option("--quiet", "-q", is_flag=True, help="print nothing; the exit code says it")
@json_option
def wait_cmd(job: str, until: str, timeout: float | None, quiet: bool, as_json: bool) -> None:
    """Wait for JOB to reach a state (default: to end), or for its next change of state.

    Prints each state as it is seen, then how the wait ended. Exit code: 0 when JOB got there (--until end: it
    ended COMPLETED), 1 when it ended otherwise (FAILED, CANCELLED, TIMEOUT, ... or ended before reaching the
    state), 124 when --timeout passed first (the job goes on), 2 for a bad JOB or --until.
    """
    def seen(status: api.JobStatus, at: float) -> None:
        if not (quiet or as_json):
            click.echo(f"{at:6.0f} s  {_state(status)}")

    done = api.wait(job, until, timeout, on_change=seen)
    if as_json:
        echo_json(done)
    elif not quiet:
        click.echo({"reached": f"job {done.job_id}: {_state(done.status)}",
                    "ended": f"job {done.job_id} ended {_state(done.status)}"
                             + ("" if done.until in ("end", "change") else f" before {done.until}"),
                    "timeout": f"job {done.job_id} is still {done.state} after {done.waited_s:.0f} s (--timeout)"}
                   [done.outcome])
        if done.outcome == "ended":
            click.echo(f"why: hpclaunch logs {done.job_id} --diagnose", err=True)
    raise SystemExit(done.exit_code)


def _state(s: api.JobStatus) -> str:
    """RUNNING, PENDING (Resources), FAILED (exit 1:0)."""
    if s.reason and not s.finished:
        return f"{s.state} ({s.reason})"
    return s.state + (f" (exit {s.exit_code})" if s.finished and s.exit_code and s.state != "COMPLETED" else "")


def register(group: click.Group) -> None:
    group.add_command(wait_cmd)
