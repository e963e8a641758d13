"""One job's page (`job`): where it stands, its timeline as a Gantt chart, its loss and throughput curves (drawn
by ui.js from `chart`, new points added while it runs), the goodput ledger, its recoveries and, once it failed,
the diagnosis with the line it quotes, node health and stragglers, its checkpoints and the tail of its logs; a
sweep's page (`sweep`): its elements side by side and their losses on one plot. `live` is what ui.js polls: the
sections that change, made again. The job id a request gives is checked (letters, digits, _ . + -) and looked up
in the registry: nothing else of the request names a file."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hpclaunch import api
from hpclaunch.api import words
from hpclaunch.api.following import row
from hpclaunch.errors import ConfigError, HpclaunchError, NotFoundError
from hpclaunch.ui import gantt
from hpclaunch.ui.html import Html, empty, facts, join, link, page, section, state_badge, table, tag
from hpclaunch.ui.pages import Answer, failed, job_href, num, percent, rate, summary_facts

if TYPE_CHECKING:
    from hpclaunch.jobs.view import JobView

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
LOG_TAIL = 40  # lines of each log shown
CHARTS = {"loss": "loss", "throughput": "tokens/s"}
LEDGER = (("startup", "start-up"), ("health", "health checks"), ("checkpoint_blocked", "checkpoints blocking"),
          ("hung", "no progress (hang)"), ("recomputed", "work done again"), ("recovery", "recovery"),
          ("other", "other"))


def view_of(job: str) -> JobView:
    """The job's view (api.status), for an id of the registry's form only (NotFoundError for anything else)."""
    if not JOB_ID.match(job) or ".." in job:
        raise NotFoundError("job", job[:60], hint="the jobs page lists your jobs")
    return api.status(job).views[0]


def rank_of(query: Mapping[str, str]) -> int | None:
    text = query.get("rank", "")
    if text in ("", "all"):
        return None
    if not text.isdigit() or len(text) > 6:
        raise ConfigError(f"rank {text[:20]!r} is not a number", hint="pick a rank from the logs' links")
    return int(text)


# --- the sections


def summary(v: JobView) -> Html:
    r = row(v)
    step = f"{r.step}" + (f" of {r.max_steps}" if r.max_steps else "") if r.step is not None else None
    eta = words.seconds(r.eta_s) if r.eta_s is not None and not r.finished else None
    return section("summary", "Where it stands", summary_facts(v, [
        ("step", step), ("last loss", num(r.loss) if r.loss is not None else None),
        ("tokens/s", rate(r.tokens_per_s) or None), ("ETA", eta),
        ("goodput", percent(v.goodput["goodput"]) if v.goodput else None)]))


def timeline(v: JobView, checkpoints: Sequence[Mapping[str, Any]]) -> Html:
    chart = gantt.chart(v.timeline, words.SPANS, recoveries=v.recoveries, checkpoints=checkpoints,
                        now=None if v.status.finished else time.time())
    lines = [tag("li", (f"restart {e['restart']}: " if len(v.timeline) > 1 else "") + words.timeline(e))
             for e in v.timeline]
    if not chart:
        return section("timeline", "Timeline", tag("p", "no stamps yet: the job has not started", class_="muted"))
    return section("timeline", "Timeline", join([chart, gantt.legend(), tag("ul", join(lines), class_="plain")]))


def ledger(v: JobView) -> Html:
    led = v.goodput
    if not led:
        return section("goodput", "Goodput", tag("p", "no ledger yet: the job has not run", class_="muted"))
    allocated, lost = float(led["allocated_s"]), led["lost_s"]
    parts = [("productive", float(led["productive_s"])), *((k, float(lost.get(k) or 0.0)) for k, _ in LEDGER)]
    rows = [["productive training", words.seconds(float(led["productive_s"])),
             percent(float(led["productive_s"]) / allocated if allocated else None)]]
    rows += [[text, words.seconds(float(lost.get(k) or 0.0)),
              percent(float(lost.get(k) or 0.0) / allocated if allocated else None)] for k, text in LEDGER]
    rows.append(["allocated", words.seconds(allocated), ""])
    spares = f" (+{led['spare_nodes']} spare)" if led.get("spare_nodes") else ""
    head = tag("p", join([tag("strong", percent(led["goodput"]), class_="big", data_goodput=led["goodput"]),
                          f" of {led['nodes']} node(s){spares} x {words.seconds(allocated)}"]))
    queued = facts([("queued before", words.seconds(float(led["queued_s"])) if led.get("queued_s") else None),
                    ("queued again (later jobs)", words.seconds(float(led["queued_retries_s"]))
                     if led.get("queued_retries_s") else None),
                    ("steps done again", led.get("recomputed_steps") or None)])
    return section("goodput", "Goodput", join([head, gantt.stacked(parts, allocated),
                                               table(["", "seconds", "of the allocation"], rows, class_="grid ledger"),
                                               queued]))


def recoveries(v: JobView) -> Html:
    if not v.recoveries and not v.retries:
        return empty("recoveries")
    rows = [[str(i), str(rec.get("cause")), str(rec.get("rank")), str(rec.get("node")), str(rec.get("resumed_step")),
             "" if rec.get("seconds_to_first_step") is None else f"{rec['seconds_to_first_step']} s"]
            for i, rec in enumerate(v.recoveries, 1)]
    parts: list[object] = [table(["#", "cause", "rank", "node", "resumed from step", "first step after"], rows)
                           if rows else ""]
    parts += [tag("p", f"{'resumed' if step.get('resume') else 'retried'}: {step.get('from')} -> {step.get('to')}"
                  + (f", because {step.get('reason')}" if step.get("reason") else "")) for step in v.retries]
    return section("recoveries", "Recoveries", join(parts))


def diagnosis(v: JobView) -> Html:
    """Why a failed job failed (api.diagnose): the cause, the rank and node, the first real error quoted, the log
    it is in, what to do. Only for a job that ended otherwise than COMPLETED."""
    if not v.status.finished or v.status.state == "COMPLETED" or v.is_sweep:
        return empty("diagnosis")
    try:
        d = api.diagnose(v.job_id)
    except HpclaunchError as exc:
        return section("diagnosis", "Diagnosis", tag("p", exc.message, class_="muted"))
    cause = d.title if d.rank is None or d.title.startswith("rank ") else f"{d.title} on rank {d.rank}"
    quoted = tag("blockquote", tag("code", d.error), class_="quote") if d.error else Html("")
    first = d.first_failure
    return section("diagnosis", "Diagnosis", join([
        tag("p", tag("strong", cause), class_="cause", data_cause=d.cause), quoted,
        facts([("node", d.node), ("first failure", f"rank {first['rank']} on {first['host']} at {first['time']}"
                                  if first else None), ("log", d.file),
               ("then", f"rank(s) {', '.join(map(str, d.waiting_ranks[:16]))} failed or waited (secondary)"
                if d.waiting_ranks and d.cause else None)]),
        tag("p", f"what to do: {d.hint}", class_="hint") if d.hint else ""]))


def health(v: JobView) -> Html:
    if not v.health and not v.stragglers:
        return empty("health")
    parts: list[object] = []
    if v.health:
        ok = bool(v.health.get("ok"))
        badge = tag("span", "passed" if ok else "FAILED", class_="state " + ("ok" if ok else "bad"))
        parts.append(tag("p", join([badge, " ", words.health(v.health)])))

        def checks(n: Mapping[str, Any]) -> str:
            return ", ".join(f"{c.get('name')} {'ok' if c.get('ok', True) else 'FAILED'}" for c in n.get("checks", []))

        rows = [[str(n.get("host") or n.get("node")), checks(n)] for n in v.health.get("nodes") or []]
        if rows:
            parts.append(table(["node", "checks"], rows))
    if v.stragglers:
        parts.append(tag("h3", "Stragglers"))
        parts.append(tag("ul", join(tag("li", words.straggler(f)) for f in v.stragglers), class_="plain"))
    return section("health", "Node health and stragglers", join(parts))


def checkpoints_section(saved: Sequence[Mapping[str, Any]]) -> Html:
    if not saved:
        return empty("checkpoints")
    rows = [[str(c.get("step")), str(c.get("why", "")), words.seconds(float(c.get("blocked_s") or 0.0)),
             words.seconds(float(c.get("write_s") or 0.0)), f"{float(c.get('bytes') or 0) / 2**20:.1f} MiB",
             str(c.get("restart", ""))] for c in saved]
    return section("checkpoints", f"Checkpoints ({len(saved)})",
                   table(["step", "why", "blocked", "written in", "size", "restart"], rows))


def logs(v: JobView, rank: int | None) -> Html:
    """The last lines of the logs (each rank's, or one rank's), with links to each rank."""
    try:
        found = api.logs(v.job_id, rank=rank, tail=LOG_TAIL)
    except HpclaunchError as exc:
        return section("logs", "Logs", tag("p", exc.message, class_="muted"))
    ranks = sorted({ln.rank for ln in found.lines if ln.rank is not None} | ({rank} if rank is not None else set()))
    ranks = sorted(set(ranks) | set(range(_world(v.record.layout))))
    here = job_href(v.job_id)
    picks = [link(f"{here}#logs", "every rank", class_="chip" + (" on" if rank is None else ""))]
    picks += [link(f"{here}?rank={r}#logs", f"rank {r}", class_="chip" + (" on" if r == rank else "")) for r in ranks]
    text = "\n".join(ln.prefixed() for ln in found.lines) or "(no lines yet)"
    return section("logs", "Logs" + (f" of rank {rank}" if rank is not None else ""),
                   join([tag("p", join(picks, " "), class_="filters"), tag("pre", text, class_="log")]))


def _world(layout: str) -> int:
    """The ranks of a layout (2n4g: 8); 0 for anything else."""
    m = re.match(r"^([0-9]+)n([0-9]+)g$", layout or "")
    return min(int(m[1]) * int(m[2]), 64) if m else 0


def charts(job_id: str, names: Sequence[str]) -> Html:
    """Where ui.js draws the curves (each fetches its chart's data); without JavaScript, a small line instead."""
    base = job_href(job_id)
    out = []
    for name in names:
        out.append(tag("figure", join([tag("figcaption", CHARTS.get(name, name)),
                                       tag("div", "", class_="chart", id=f"chart-{name}",
                                           data_src=f"{base}/chart/{name}", data_name=name)])))
    return tag("div", join(out), class_="charts")


def noscript_curve(curves: api.Curves) -> Html:
    _, losses = curves.series("loss")
    line = gantt.sparkline(losses, 480, 120)
    return tag("noscript", join([tag("p", "the loss (JavaScript draws it larger, with its values):"), line])) \
        if line else Html("")


# --- the pages


def job(job_id: str, query: Mapping[str, str]) -> Answer:
    try:
        v = view_of(job_id)
        rank = rank_of(query)
    except HpclaunchError as exc:
        return failed(exc, f"Job {job_id[:60]}")
    if v.is_sweep:
        return sweep(v)
    curves = api.curves(v.job_id)
    body = join([summary(v), timeline(v, curves.checkpoints),
                 section("curves", "Loss and throughput", join([charts(v.job_id, ["loss", "throughput"]),
                                                                noscript_curve(curves)])),
                 ledger(v), recoveries(v), diagnosis(v), health(v), checkpoints_section(curves.checkpoints),
                 logs(v, rank)])
    live = None if v.status.finished else f"{job_href(v.job_id)}/live" + (f"?rank={rank}" if rank is not None else "")
    return 200, page(f"Job {v.job_id}", body, live=live, refresh=live is not None, charts=True,
                     data={"job": v.job_id, "state": v.status.state})


def live(job_id: str, query: Mapping[str, str]) -> dict[str, Any]:
    """The sections of a job's page that change, made again, and whether it has ended (ui.js then stops)."""
    v = view_of(job_id)
    if v.is_sweep:
        return {"sections": {"elements": elements(v)}, "finished": v.status.finished}
    curves = api.curves(v.job_id)
    made = [summary(v), timeline(v, curves.checkpoints), ledger(v), recoveries(v), diagnosis(v), health(v),
            checkpoints_section(curves.checkpoints), logs(v, rank_of(query))]
    found = {}
    for html_ in made:
        m = re.match(r'<section id="([a-z]+)"', html_)
        if m:
            found[m[1]] = str(html_)
    return {"sections": found, "finished": v.status.finished, "state": v.status.state}


def chart(job_id: str, name: str, query: Mapping[str, str]) -> dict[str, Any]:
    """A chart's data for uPlot: `x` (steps) and its series, each {label, values} aligned with x (None where a
    series has no value); `?after=STEP`: only the steps after it. A sweep's loss: each element's on one plot."""
    if name not in CHARTS:
        raise NotFoundError("chart", name[:40], hint=f"one of {', '.join(CHARTS)}")
    after_text = query.get("after", "")
    after = int(after_text) if after_text.lstrip("-").isdigit() and len(after_text) < 12 else None
    v = view_of(job_id)
    if v.is_sweep:
        return overlay(v, after)
    c = api.curves(v.job_id, after=after)
    if name == "throughput":
        return {"x": c.steps, "series": [{"label": "tokens/s", "values": c.values["tokens_per_s"]}],
                "finished": v.status.finished}
    evals = {e["step"]: e.get("eval_loss") for e in c.evals}
    xs = sorted(set(c.steps) | set(evals))
    loss = dict(zip(c.steps, c.values["loss"], strict=False))
    series: list[dict[str, Any]] = [{"label": "loss", "values": [loss.get(s) for s in xs]}]
    if evals:
        series.append({"label": "eval loss", "values": [evals.get(s) for s in xs], "points": True})
    return {"x": xs, "series": series, "finished": v.status.finished}


def overlay(v: JobView, after: int | None) -> dict[str, Any]:
    """The losses of a sweep's elements on one x axis (the union of their steps)."""
    per: list[tuple[str, dict[int, float | None]]] = []
    for e in v.elements:
        c = api.curves(e.job_id, after=after)
        per.append((f"{e.job_id} {e.values}".strip(), dict(zip(c.steps, c.values["loss"], strict=False))))
    xs = sorted({s for _, d in per for s in d})
    return {"x": xs, "series": [{"label": label, "values": [d.get(s) for s in xs]} for label, d in per],
            "finished": v.status.finished}


def elements(v: JobView) -> Html:
    """A sweep's elements side by side: values, state, steps, first, last and least loss, tokens/s, goodput."""
    rows = []
    for e in v.elements:
        c = api.curves(e.job_id)
        _, losses = c.series("loss")
        _, tps = c.series("tokens_per_s")
        rows.append([link(job_href(e.job_id), e.job_id), e.values, state_badge(e.status.state),
                     str(c.steps[-1]) if c.steps else "", num(losses[0]) if losses else "",
                     num(losses[-1]) if losses else "", num(min(losses)) if losses else "",
                     rate(sum(tps) / len(tps)) if tps else "",
                     percent(e.goodput["goodput"]) if e.goodput else "", gantt.sparkline(losses)])
    return section("elements", f"Elements ({len(rows)})", table(
        ["job", "values", "state", "steps", "first loss", "last loss", "least loss", "mean tok/s", "goodput", "loss"],
        rows, row_ids=[e.job_id for e in v.elements]))


def sweep(v: JobView) -> Answer:
    sw = v.record.sweep or {}
    head = summary_facts(v, [("swept", ", ".join(sw.get("keys", []))),
                             ("at a time", sw.get("max_parallel"))])
    body = join([section("summary", "Sweep", head), elements(v),
                 section("curves", "Losses", charts(v.job_id, ["loss"]))])
    live = None if v.status.finished else f"{job_href(v.job_id)}/live"
    return 200, page(f"Sweep {v.job_id}", body, live=live, refresh=live is not None, charts=True,
                     data={"job": v.job_id, "state": v.status.state})

