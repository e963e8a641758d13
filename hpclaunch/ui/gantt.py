"""A job's timeline as a Gantt chart (SVG, drawn here: it shows without JavaScript): one row per restart, a bar per
span between two stamps of its timeline (queued, each start-up phase, training), the recovery between a launch
that failed and the relaunch inside the same allocation, the checkpoints as ticks where training was blocked to
save, the faults detected as marks. Each bar says what it is (`data-span`) and, on hover, how long it took."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hpclaunch.api import words
from hpclaunch.ui.html import Html, join, tag

# the timeline's phases in order and the span that ends at each (hpclaunch/state/timeline.py's PHASES, SPANS: the
# records this face is given name them, and it draws what it finds)
START_UP = ("env", "env_pack", "health", "env_staging", "env_staging_failed", "job_script", "container", "launcher",
            "imports", "rendezvous", "model_load", "data")
WIDTH, LABEL_W, ROW_H, TOP, AXIS_H = 960, 150, 28, 8, 26


def kind(span: str) -> str:
    """The colour family of a span: queued, startup, training, recovery, running (a phase not stamped yet)."""
    if span in ("queued", "recovery", "training", "running"):
        return span
    return "training" if span == "first_step" else "startup"


def bars(entry: Mapping[str, Any], before: Mapping[str, Any] | None, spans: Mapping[str, str], now: float | None
         ) -> list[tuple[str, float, float]]:
    """(span, start, end) of one restart's entry (`timeline`'s per-restart record, its phases in order); `before`:
    the restart before it (its end starts this one's first span: recovery inside the same job, else the queue of
    a requeue); `now`: the job still runs, its last span is drawn until now."""
    stamps = sorted(((t, p) for p, t in entry["phases"].items()), key=lambda x: x[0])
    out: list[tuple[str, float, float]] = []
    prev = None
    if before is not None and "submitted" not in entry["phases"]:
        end = before["phases"].get("finished")
        if end is not None and stamps:
            same = before.get("job") == entry.get("job")
            out.append(("recovery" if same else "queued", end, stamps[0][0]))
    for t, phase in stamps:
        if prev is not None:
            out.append((spans.get(phase, phase), prev, t))
        prev = t
    if now is not None and prev is not None and "finished" not in entry["phases"]:
        last = stamps[-1][1]
        out.append(("training" if last == "first_step" else "running", prev, max(prev, now)))
    return [b for b in out if b[2] >= b[1]]


def _ticks(span: float) -> list[float]:
    """Nice tick positions (seconds) over 0..span, about six of them."""
    if span <= 0:
        return [0.0]
    raw = span / 6
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if step >= 60 and span > 300:
        step = next((s for s in (60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400) if s >= raw), 86400)
    return [i * step for i in range(int(span // step) + 1)]


def chart(timeline: Sequence[Mapping[str, Any]], spans: Mapping[str, str], *,
          recoveries: Sequence[Mapping[str, Any]] = (), checkpoints: Sequence[Mapping[str, Any]] = (),
          now: float | None = None) -> Html:
    """The SVG of a job's timeline (`timeline`: its per-restart entries, as `status --json` has them; `spans`: the
    span that ends at each phase; `now`: the time, while the job runs). Empty markup before the first stamp."""
    rows = [(entry, bars(entry, timeline[i - 1] if i else None, spans, now)) for i, entry in enumerate(timeline)]
    times = [t for _, found in rows for _, a, b in found for t in (a, b)]
    times += [float(c["at"]) for c in checkpoints if isinstance(c.get("at"), (int, float))]
    if not times:
        return Html("")
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1e-3)
    plot_w = WIDTH - LABEL_W - 10

    def x(t: float) -> float:
        return LABEL_W + (t - t0) / span * plot_w

    height = TOP + ROW_H * len(rows) + AXIS_H
    parts: list[Html] = []
    for i, (entry, found) in enumerate(rows):
        y = TOP + i * ROW_H
        label = f"restart {entry['restart']}" + (f" · job {entry['job']}" if entry.get("job") else "")
        parts.append(tag("text", label, x=4, y=y + ROW_H / 2 + 4, class_="label"))
        for name, a, b in found:
            width = max(x(b) - x(a), 1.0)
            text = f"{name.replace('_', ' ')} {words.seconds(b - a)}"
            parts.append(tag("rect", tag("title", text), x=f"{x(a):.1f}", y=y + 4, width=f"{width:.1f}",
                             height=ROW_H - 8, class_=f"bar {kind(name)}", data_span=name,
                             data_restart=entry["restart"], data_seconds=f"{b - a:.3f}"))
        for c in checkpoints:
            if c.get("restart", 0) != entry["restart"] or not isinstance(c.get("at"), (int, float)):
                continue
            blocked = float(c.get("blocked_s") or 0.0)
            cx = x(float(c["at"]) - blocked)
            text = (f"checkpoint step {c.get('step')} ({c.get('why', '?')}): blocked {words.seconds(blocked)}, "
                    f"written in {words.seconds(float(c.get('write_s') or 0.0))}")
            width = max(blocked / span * plot_w, 2.0)
            parts.append(tag("rect", tag("title", text), x=f"{cx:.1f}", y=y + 1, width=f"{width:.1f}",
                             height=ROW_H - 2, class_="tick checkpoint", data_step=c.get("step"),
                             data_restart=entry["restart"]))
    for r in recoveries:
        at = r.get("detected_at")
        if not isinstance(at, (int, float)) or not t0 <= at <= t1:
            continue
        row = next((i for i, (e, _) in enumerate(rows) if e["restart"] == r.get("resumed_restart", 0) - 1), 0)
        y = TOP + row * ROW_H
        text = f"fault detected: {r.get('cause')} on rank {r.get('rank')} ({r.get('node')})"
        parts.append(tag("rect", tag("title", text), x=f"{x(at) - 1:.1f}", y=y, width=3, height=ROW_H,
                         class_="tick fault", data_cause=r.get("cause")))
    axis_y = TOP + ROW_H * len(rows) + 4
    for t in _ticks(span):
        parts.append(Html(tag("line", "", x1=f"{x(t0 + t):.1f}", x2=f"{x(t0 + t):.1f}", y1=TOP, y2=axis_y,
                              class_="grid")
                          + tag("text", words.seconds(t) if t else "0", x=f"{x(t0 + t):.1f}", y=axis_y + 14,
                                class_="axis")))
    return tag("svg", join(parts), class_="gantt", viewBox=f"0 0 {WIDTH} {height}", width=WIDTH, height=height,
               role="img", aria_label="the job's timeline", xmlns="http://www.w3.org/2000/svg")


LEGEND = (("queued", "queued"), ("startup", "start-up phases"), ("training", "training"),
          ("recovery", "recovery"), ("checkpoint", "checkpoint (training blocked)"), ("fault", "fault detected"))


def legend() -> Html:
    return tag("p", join(tag("span", text, class_=f"key {k}") for k, text in LEGEND), class_="legend")


def stacked(parts: Sequence[tuple[str, float]], total: float, width: int = 600) -> Html:
    """A horizontal bar of `parts` ((kind, seconds)) over `total` seconds: the goodput ledger at a glance."""
    if total <= 0:
        return Html("")
    x, out = 0.0, []
    for name, s in parts:
        w = s / total * width
        if w <= 0:
            continue
        out.append(tag("rect", tag("title", f"{name.replace('_', ' ')} {words.seconds(s)}"), x=f"{x:.1f}", y=0,
                       width=f"{w:.1f}", height=18, class_=f"bar {name}", data_part=name))
        x += w
    return tag("svg", join(out), class_="ledger-bar", viewBox=f"0 0 {width} 18", width=width, height=18,
               xmlns="http://www.w3.org/2000/svg")


def sparkline(values: Sequence[float], width: int = 120, height: int = 24) -> Html:
    """A small SVG line of `values` (the loss of a job in the table, the curves without JavaScript)."""
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(vals) < 2:
        return Html("")
    lo, hi = min(vals), max(vals)
    rng = (hi - lo) or 1.0
    pts = " ".join(f"{i / (len(vals) - 1) * width:.1f},{height - 2 - (v - lo) / rng * (height - 4):.1f}"
                   for i, v in enumerate(vals))
    return tag("svg", tag("polyline", "", points=pts, class_="spark"), class_="sparkline",
               viewBox=f"0 0 {width} {height}", width=width, height=height, xmlns="http://www.w3.org/2000/svg",
               data_points=len(vals))
