"""hpclaunch status [JOB] and hpclaunch jobs: the scheduler's view (one call for all listed jobs),
pending reasons in words, elapsed/limit and the last metrics the job wrote."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import click

from hpclaunch import api
from hpclaunch.api import words
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option, say
from hpclaunch.cli.tables import print_table, state_style, terminal_console
from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.api import JobStatus
    from hpclaunch.jobs.view import JobView
    from hpclaunch.state.registry import JobRecord

_METRIC_KEYS = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "samples_per_s", "mfu", "eval_loss",
                "perplexity")


def listed_records() -> list[JobRecord]:
    """Every record (api.records: the pending records of interrupted submits settled), its warnings on stderr."""
    listed = api.records()
    say(listed.notes)
    return listed.items


def _sweep_state(v: JobView) -> str:
    counts = Counter(e.status.state for e in v.elements)
    return (f"{v.status.state} ({len(v.elements)} elements: "
            + ", ".join(f"{n} {state}" for state, n in counts.items()) + ")")


def _num(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def _metrics_line(m: dict | None) -> str | None:
    if not m:
        return None
    return "  ".join(f"{k} {_num(m[k])}" for k in _METRIC_KEYS if m.get(k) is not None)


def _elapsed(s: JobStatus) -> str:
    if not s.elapsed:
        return ""
    return s.elapsed + (f" / {s.time_limit}" if s.time_limit else "")


NO_JOBS = "no jobs recorded yet (`hpclaunch submit RECIPE --profile PROFILE`)"


def watch_jobs(jobs: tuple[str, ...], interval: float, once: bool) -> None:
    """Run the live view until Ctrl-C (exit 0, quietly) or until every named job has finished."""
    from hpclaunch.cli import live

    if interval <= 0:
        raise ConfigError(f"--interval {interval:g}: must be more than 0 seconds (e.g. --interval 5)")
    if not jobs and not listed_records():
        click.echo(NO_JOBS, err=True)
        return
    terminal = terminal_console() is not None
    try:
        live.run(listed_records, jobs, interval=interval, once=once, terminal=terminal, echo=click.echo)
    except KeyboardInterrupt:
        return


interval_option = click.option("--interval", "-i", default=5.0, show_default=True, metavar="SECONDS",
                               help="seconds between refreshes (one scheduler call each)")


RECENT = api.RECENT


@click.command("status", epilog=examples(
    "hpclaunch status 12345",
    "hpclaunch status  # the 10 newest jobs",
    "hpclaunch status --all  # every recorded job",
    "hpclaunch status 12345 --json | jq .reason_text"))
@click.argument("job", required=False, shell_complete=complete.job)
@click.option("--all", "all_jobs", is_flag=True, help=f"without JOB: every recorded job, not only the {RECENT} newest")
@json_option
def status_cmd(job: str | None, all_jobs: bool, as_json: bool) -> None:
    """State of JOB (or of the 10 newest jobs): state, pending reason in words, nodes, elapsed/limit,
    last metrics."""
    found = api.status(job, all_jobs=all_jobs)
    say(found.notes)
    if not found.views and not as_json:
        click.echo(NO_JOBS, err=True)
    if as_json:
        echo_json(found)
        return
    shown = found.views
    for v in shown:
        _print_sweep(v) if v.is_sweep else _print_job(v)


def _print_job(v: JobView) -> None:
    r, s = v.record, v.status
    click.echo(f"job {r.job_id}  {s.state}" + (f" (exit {s.exit_code})" if s.exit_code and s.finished else ""))
    click.echo(f"  recipe {v.recipe} on {r.profile}, layout {r.layout}, {r.launcher}")
    if s.reason and s.state != "COMPLETED":
        text = s.reason_text
        click.echo(f"  reason: {s.reason}: {text}" if text != s.reason else f"  reason: {s.reason}")
    if s.expected_start:
        click.echo(f"  expected to start: {s.expected_start} (the scheduler's estimate: it moves as jobs end early "
                   "or others are queued ahead)")
    if v.stop_reason:
        click.echo(f"  stopped by hpclaunch: {v.stop_reason}")
    if r.resumes:
        click.echo(f"  resumes job {r.resumes.get('job')} " + _resumed_from(r.resumes))
    for step in v.retries:
        nxt = v.retry_status(step)
        state = nxt.state if nxt else "UNKNOWN"
        if step.get("resume"):
            click.echo(f"  resumed: {step.get('from')} -> {step['to']} ({state}) " + _resumed_from(step))
            continue
        if step.get("chain"):
            click.echo(f"  follow-on: {step.get('from')} -> {step['to']} ({state}), because {step.get('reason')} "
                       "(checkpoint.requeue is false: it resumes from the checkpoint)")
            continue
        click.echo(f"  retry {step.get('retry')}: {step.get('from')} -> {step['to']} "
                   f"({state}), because {step.get('reason')}; excluded {step.get('exclude')}")
    for number, rec in enumerate(v.recoveries, 1):
        click.echo(f"  recovery {number}: {words.recovery(rec)}")
    if s.nodes:
        click.echo(f"  nodes: {s.nodes}")
    if s.elapsed:
        click.echo(f"  elapsed: {_elapsed(s)}")
    metrics = _metrics_line(v.last_metrics)
    if metrics:
        click.echo(f"  last metrics: {metrics}")
    _print_timeline(v.timeline)
    if v.health:
        click.echo(f"  node health: {words.health(v.health)}")
    for found in v.stalls:
        click.echo(f"  STALLED: {words.stall(found)}; the hang watchdog ends it when it stays so")
    for found in v.stragglers:
        click.echo(f"  straggler: {words.straggler(found)}")
    for found in v.slow_nodes:
        click.echo(f"  slow node: {words.slow_node(found)}")
    if v.sweep_id:
        click.echo(f"  sweep {v.sweep_id}, element {(r.sweep or {}).get('index')}: {v.values}")
    click.echo(f"  run directory: {r.run_dir}")
    if v.provenance:
        click.echo(f"  provenance: {v.provenance}")
    if v.wandb:
        click.echo(f"  W&B: {words.wandb(v.wandb, r.job_id)}")
    if s.source:
        click.echo(f"  (from {s.source})")
    if s.finished and s.state != "COMPLETED":
        click.echo(f"  why: hpclaunch logs {r.job_id} --diagnose")


def _resumed_from(link: dict) -> str:
    """from where a resume (`hpclaunch resume`) went on: its checkpoint, or from scratch."""
    if link.get("from_scratch") or not link.get("checkpoint"):
        return "from scratch"
    return f"from its checkpoint at step {link.get('step')} ({link.get('checkpoint')})"


def _print_timeline(restarts: list[dict]) -> None:
    """queued 3m12s, start-up 41s (env 18s, ...), training 10m05s; one line per restart when there are several."""
    for entry in restarts:
        which = "" if len(restarts) == 1 else f" (restart {entry['restart']}, job {entry['job']})"
        click.echo(f"  timeline{which}: {words.timeline(entry)}")


def _print_sweep(v: JobView) -> None:
    r, sweep = v.record, v.record.sweep or {}
    click.echo(f"sweep {r.job_id}  {_sweep_state(v)}")
    at_a_time = f", {sweep['max_parallel']} at a time" if sweep.get("max_parallel") else ""
    click.echo(f"  recipe {v.recipe} on {r.profile}, layout {r.layout}, "
               f"{r.launcher}; swept {', '.join(sweep.get('keys', []))}{at_a_time}")
    for e in v.elements:
        s = e.status
        line = f"  {e.job_id}  {e.values}  {s.state}"
        if s.reason and not s.finished:
            line += f" ({s.reason})"
        if s.elapsed:
            line += f"  elapsed {_elapsed(s)}"
        metrics = _metrics_line(e.last_metrics)
        click.echo(line + (f"  last metrics: {metrics}" if metrics else ""))
    click.echo(f"  sweep folder: {r.run_dir}")
    if v.elements:
        click.echo(f"  one element: hpclaunch status {v.elements[0].job_id}")


JOBS_COLUMNS = ["job", "recipe", "profile", "layout", "state", "elapsed", "last loss", "submitted", "name"]
# on a terminal, most wanted first (what does not fit falls off the right): the job id and name whole, the state
# and recipe cut short where need be, the submit time without its year
JOBS_TERMINAL = ["job", "name", "state", "recipe", "elapsed", "last loss", "submitted"]


def _job_rows(v: JobView) -> list[tuple[str, ...]]:
    """The job's row; a sweep's, then one per element (its values instead of the recipe)."""
    s, r = v.status, v.record
    state = s.state + (f" ({s.pending_text()})" if s.pending_text() else "")
    if r.resumes:
        state += f" (resumes {r.resumes.get('job')})"
    if v.retries:
        state += f" -> {v.retries[-1]['to']} {v.latest.state if v.latest else 'UNKNOWN'}"
    recipe = v.recipe
    if v.is_sweep:
        recipe += " sweep " + ",".join((r.sweep or {}).get("keys", []))
        state = _sweep_state(v)
    rows: list[tuple[str, ...]] = [
        (r.job_id, recipe, r.profile, r.layout, state, s.elapsed or "", _loss(v), _when(r.submitted_at), r.name)]
    for e in v.elements:
        (row,) = _job_rows(e)
        rows.append((f"  {e.job_id}", e.values, *row[2:7], "", ""))
    return rows


def _loss(v: JobView) -> str:
    m = v.last_metrics or {}
    return _num(m["loss"]) if "loss" in m else ""


def _when(stamp: str) -> str:
    """2026-11-23T06:43:57+0000 -> 2026-11-23 06:43 (the minute is enough in a table)."""
    return stamp[:16].replace("T", " ")


@click.command("jobs", epilog=examples(
    "hpclaunch jobs",
    "hpclaunch jobs -n 5  # the 5 newest",
    "hpclaunch jobs --watch  # live, every 5 s (= hpclaunch watch)",
    "hpclaunch jobs --json | jq -r '.[] | select(.state == \"FAILED\") | .job_id'"))
@click.option("--limit", "-n", default=20, show_default=True, metavar="N", help="the N newest jobs (0: all)")
@click.option("--watch", "live", is_flag=True, help="a live view, refreshed every --interval s (`hpclaunch watch`)")
@interval_option
@json_option
def jobs_cmd(limit: int, live: bool, interval: float, as_json: bool) -> None:
    """Recent jobs, one line each: id, name, state, recipe, elapsed, last loss, when submitted.

    On a terminal the table fits the window (the id and name whole; too narrow, the last columns are left out),
    states in colour; piped, it is tab-separated text with every column (job, recipe, profile, layout, state,
    elapsed, last loss, submitted, name).
    """
    if live:
        watch_jobs((), interval, once=False)
        return
    found = api.jobs(limit)
    say(found.notes)
    if as_json:
        echo_json(found)
        return
    rows = [row for v in found.items for row in _job_rows(v)]
    print_table(JOBS_COLUMNS, rows, terminal=JOBS_TERMINAL, ids=("job", "name"), shrink=("state", "recipe"),
                styles={"state": state_style}, short={"submitted": lambda t: t[5:]})


def register(group: click.Group) -> None:
    group.add_command(status_cmd)
    group.add_command(jobs_cmd)
