"""hpclaunch status [JOB] and hpclaunch jobs: the scheduler's view (one call for all listed jobs),
pending reasons in words, elapsed/limit and the last metrics the job wrote."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option
from hpclaunch.cli.tables import print_table, state_style, surely_not_a_terminal
from hpclaunch.errors import ConfigError
from hpclaunch.jobs import sync as wandb_sync
from hpclaunch.jobs.state import retries, statuses, stop_reason
from hpclaunch.report.metrics import last_metrics
from hpclaunch.schedulers import JobStatus, get_scheduler
from hpclaunch.state import registry, timeline
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.submission import provenance
from hpclaunch.submission.sweep import is_sweep, label, sweep_elements, sweep_id

_METRIC_KEYS = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "samples_per_s", "mfu", "eval_loss",
                "perplexity")


def _find_job(record: registry.JobRecord) -> str | None:
    return get_scheduler(record.scheduler).find_job(Path(record.run_dir))


def listed_records() -> list[registry.JobRecord]:
    """Every record, after settling the pending records of interrupted submits; unreadable records are
    skipped with one warning each."""
    for line in registry.recover(_find_job):
        click.echo(f"hpclaunch: warning: {line}", err=True)
    bad: list[registry.RegistryError] = []
    records = registry.all_records(bad)
    for exc in bad:
        click.echo(f"hpclaunch: warning: skipped {exc.message} ({exc.hint})", err=True)
    return records


def grouped(records: list[registry.JobRecord]) -> list[tuple[registry.JobRecord, list[registry.JobRecord]]]:
    """Each listed job once, in order: a sweep with its elements under it; an element whose sweep is not
    listed stands alone."""
    listed = {r.job_id for r in records if is_sweep(r)}
    members: dict[str, list[registry.JobRecord]] = defaultdict(list)
    for r in records:
        parent = sweep_id(r)
        if parent and parent != r.job_id and parent in listed:
            members[parent].append(r)
    return [(r, sorted(members.get(r.job_id, []), key=lambda e: int((e.sweep or {}).get("index", 0))))
            for r in records if not (sweep_id(r) in listed and not is_sweep(r))]


def _values(r: registry.JobRecord) -> str:
    return label((r.sweep or {}).get("values") or {})


def _sweep_state(s: JobStatus, elements: list[registry.JobRecord], found: dict[str, JobStatus]) -> str:
    counts = Counter(found[e.job_id].state for e in elements)
    return f"{s.state} ({len(elements)} elements: " + ", ".join(f"{n} {state}" for state, n in counts.items()) + ")"


def _num(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def _metrics_line(m: dict | None) -> str | None:
    if not m:
        return None
    return "  ".join(f"{k} {_num(m[k])}" for k in _METRIC_KEYS if k in m)


def _as_dict(r: registry.JobRecord, s: JobStatus, found: dict[str, JobStatus],
             elements: list[registry.JobRecord] | None = None) -> dict:
    chain = retries(r)
    latest = found.get(str(chain[-1]["to"])) if chain else None
    out = {**asdict(r), **asdict(s), "last_metrics": last_metrics(Path(r.run_dir)),
           "stop_reason": stop_reason(r), "retries": chain, "latest": asdict(latest) if latest else None,
           "timeline": timeline.load(RunFiles(Path(r.run_dir))),
           "provenance": provenance.summary(provenance.load(Path(r.run_dir))),
           "wandb": wandb_sync.summary(Path(r.run_dir))}
    if is_sweep(r):
        out["elements"] = [_as_dict(e, found[e.job_id], found) for e in elements or []]
    return out


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
    terminal = not surely_not_a_terminal()
    if terminal:
        from rich.console import Console

        terminal = Console().is_terminal
    try:
        live.run(listed_records, jobs, interval=interval, once=once, terminal=terminal, echo=click.echo)
    except KeyboardInterrupt:
        return


interval_option = click.option("--interval", "-i", default=5.0, show_default=True, metavar="SECONDS",
                               help="seconds between refreshes (one scheduler call each)")


RECENT = 10  # `status` without a job: this many of the newest jobs


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
    groups = _shown_groups(job, all_jobs)
    if not groups and not as_json:
        click.echo(NO_JOBS, err=True)
    found = statuses([r for top, elements in groups for r in (top, *elements)])
    if as_json:
        data = [_as_dict(r, found[r.job_id], found, elements) for r, elements in groups]
        echo_json(data[0] if job else data)
        return
    for r, elements in groups:
        if is_sweep(r):
            _print_sweep(r, elements, found)
            continue
        _print_job(r, found)


def _shown_groups(job: str | None, all_jobs: bool) -> list[tuple[registry.JobRecord, list[registry.JobRecord]]]:
    """JOB with its sweep's elements, else the newest jobs (all with --all), saying on stderr when some are left out."""
    if job:
        one = registry.get(job)
        return [(one, sweep_elements(one))]
    groups = grouped(listed_records())
    if not all_jobs and len(groups) > RECENT:
        click.echo(f"hpclaunch: the {RECENT} newest of {len(groups)} jobs (`hpclaunch status --all` for all)",
                   err=True)
        groups = groups[-RECENT:]
    return groups


def _print_job(r: registry.JobRecord, found: dict[str, JobStatus]) -> None:
    """One job's lines: what the scheduler says first, then what its run directory holds, then where to look next."""
    s = found[r.job_id]
    head = f"job {r.job_id}  {s.state}" + (f" (exit {s.exit_code})" if s.exit_code and s.finished else "")
    click.echo(head)
    recipe = r.recipe + (f":{r.preset}" if r.preset else "")
    click.echo(f"  recipe {recipe} on {r.profile}, layout {r.layout}, "
               f"{r.launcher}")
    if s.reason and s.state != "COMPLETED":
        text = s.reason_text
        click.echo(f"  reason: {s.reason}: {text}" if text != s.reason else f"  reason: {s.reason}")
    stopped = stop_reason(r)
    if stopped:
        click.echo(f"  stopped by hpclaunch: {stopped}")
    for step in retries(r):
        nxt = found.get(str(step["to"]))
        click.echo(f"  retry {step.get('retry')}: {step.get('from')} -> {step['to']} "
                   f"({nxt.state if nxt else 'UNKNOWN'}), because {step.get('reason')}; "
                   f"excluded {step.get('exclude')}")
    if s.nodes:
        click.echo(f"  nodes: {s.nodes}")
    if s.elapsed:
        click.echo(f"  elapsed: {_elapsed(s)}")
    metrics = _metrics_line(last_metrics(Path(r.run_dir)))
    if metrics:
        click.echo(f"  last metrics: {metrics}")
    _print_timeline(timeline.load(RunFiles(Path(r.run_dir))))
    if sweep_id(r):
        click.echo(f"  sweep {sweep_id(r)}, element {(r.sweep or {}).get('index')}: {_values(r)}")
    click.echo(f"  run directory: {r.run_dir}")
    ran_with = provenance.summary(provenance.load(Path(r.run_dir)))
    if ran_with:
        click.echo(f"  provenance: {ran_with}")
    tracked = wandb_sync.summary(Path(r.run_dir))
    if tracked:
        click.echo(f"  W&B: {wandb_sync.describe(tracked, r.job_id)}")
    if s.source:
        click.echo(f"  (from {s.source})")
    if s.finished and s.state != "COMPLETED":
        click.echo(f"  why: hpclaunch logs {r.job_id} --diagnose")


def _print_timeline(restarts: list[dict]) -> None:
    """queued 3m12s, start-up 41s (env 18s, ...), training 10m05s; one line per restart when there are several."""
    for entry in restarts:
        which = "" if len(restarts) == 1 else f" (restart {entry['restart']}, job {entry['job']})"
        click.echo(f"  timeline{which}: {timeline.describe(entry)}")


def _print_sweep(r: registry.JobRecord, elements: list[registry.JobRecord], found: dict[str, JobStatus]) -> None:
    sweep = r.sweep or {}
    click.echo(f"sweep {r.job_id}  {_sweep_state(found[r.job_id], elements, found)}")
    at_a_time = f", {sweep['max_parallel']} at a time" if sweep.get("max_parallel") else ""
    click.echo(f"  recipe {r.recipe}{f':{r.preset}' if r.preset else ''} on {r.profile}, layout {r.layout}, "
               f"{r.launcher}; swept {', '.join(sweep.get('keys', []))}{at_a_time}")
    for e in elements:
        s = found[e.job_id]
        line = f"  {e.job_id}  {_values(e)}  {s.state}"
        if s.reason and not s.finished:
            line += f" ({s.reason})"
        if s.elapsed:
            line += f"  elapsed {_elapsed(s)}"
        metrics = _metrics_line(last_metrics(Path(e.run_dir)))
        click.echo(line + (f"  last metrics: {metrics}" if metrics else ""))
    click.echo(f"  sweep folder: {r.run_dir}")
    if elements:
        click.echo(f"  one element: hpclaunch status {elements[0].job_id}")


JOBS_COLUMNS = ["job", "recipe", "profile", "layout", "state", "elapsed", "last loss", "submitted", "name"]
# on a terminal: what fits 80 columns (the job id, state and numbers never cut; the name and recipe may be; the
# submit time without its year)
JOBS_TERMINAL = ["job", "name", "recipe", "state", "elapsed", "last loss", "submitted"]


def _job_row(r: registry.JobRecord, top: registry.JobRecord, elements: list[registry.JobRecord],
             found: dict[str, JobStatus]) -> tuple[str, ...]:
    s = found[r.job_id]
    m = last_metrics(Path(r.run_dir)) or {}
    recipe = r.recipe + (f":{r.preset}" if r.preset else "")
    state = s.state + (f" ({s.reason})" if s.state == "PENDING" and s.reason else "")
    chain = retries(r)
    if chain:
        last = found.get(str(chain[-1]["to"]))
        state += f" -> {chain[-1]['to']} {last.state if last else 'UNKNOWN'}"
    job_id, submitted, name = r.job_id, _when(r.submitted_at), r.name
    if r is not top:  # an element, under its sweep: its values instead of the recipe
        job_id, recipe, submitted, name = f"  {r.job_id}", _values(r), "", ""
    elif is_sweep(r):
        recipe += " sweep " + ",".join((r.sweep or {}).get("keys", []))
        state = _sweep_state(s, elements, found)
    return (job_id, recipe, r.profile, r.layout, state, s.elapsed or "", _num(m["loss"]) if "loss" in m else "",
            submitted, name)


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
    """Recent jobs, one line each: id, name, recipe, state, elapsed, last loss, when submitted.

    On a terminal the table fits the window (80 columns and up), states in colour; piped, it is tab-separated
    text with every column (job, recipe, profile, layout, state, elapsed, last loss, submitted, name).
    """
    if live:
        watch_jobs((), interval, once=False)
        return
    groups = grouped(listed_records())
    groups = groups[-limit:] if limit > 0 else groups
    found = statuses([r for top, elements in groups for r in (top, *elements)])
    if as_json:
        echo_json([_as_dict(r, found[r.job_id], found, elements) for r, elements in groups])
        return
    rows = [_job_row(r, top, elements, found) for top, elements in groups for r in (top, *elements)]
    print_table(JOBS_COLUMNS, rows, terminal=JOBS_TERMINAL, shrink=("name", "recipe"),
                styles={"state": state_style}, short={"submitted": lambda t: t[5:]})


def register(group: click.Group) -> None:
    group.add_command(status_cmd)
    group.add_command(jobs_cmd)
