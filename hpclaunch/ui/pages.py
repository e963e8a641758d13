"""The pages that are not about one job: the jobs across profiles (`jobs`), the plan of a recipe on a profile
(`plan`), where devices are free (`avail`); and the answer to a page that failed (`failed`). Each is made from
hpclaunch.api results and returns (HTTP status, the page). A name a request gives (profile, recipe, preset) is used
only when it is one of those the api lists: never a path."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from hpclaunch import api
from hpclaunch.api import words
from hpclaunch.api.following import row
from hpclaunch.errors import HpclaunchError, NotFoundError
from hpclaunch.ui import gantt
from hpclaunch.ui.html import Html, facts, h, join, link, page, section, state_badge, table, tag

if TYPE_CHECKING:
    from hpclaunch.jobs.view import JobView

Answer = tuple[int, str]
JOBS_LIMIT = 50  # the jobs page: this many of the newest (?all=1: every one)
LAYOUT = re.compile(r"^[0-9]{1,5}n[0-9]{1,3}g$")


def job_href(job_id: str) -> str:
    return f"/job/{quote(job_id, safe='')}"


def num(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return "" if v is None else str(v)


def rate(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k" if v >= 1e3 else f"{v:.0f}"


def percent(v: float | None) -> str:
    return "" if v is None else f"{100 * v:.1f} %"


def state_cell(v: JobView) -> Html:
    """The state, and for a pending job its reason and expected start ("Resources, ~03:10"), in words on hover."""
    s = v.status
    if v.is_sweep:
        states = [e.status.state for e in v.elements]
        counts = ", ".join(f"{states.count(x)} {x}" for x in dict.fromkeys(states))
        return join([state_badge(s.state), tag("span", f" {len(states)} elements: {counts}", class_="muted")])
    pending = s.pending_text()
    extra = tag("span", f" {pending}", class_="muted", title=s.reason_text or None) if pending else Html("")
    return join([state_badge(s.state), extra])


def progress_cell(step: int | None, total: int | None) -> Html:
    if step is None:
        return Html("")
    if not total:
        return h(f"step {step}")
    return join([tag("progress", f"{step}/{total}", value=min(step, total), max=total),
                 tag("span", f" {step}/{total}", class_="muted")])


def jobs_section(views: Sequence[JobView], profile: str | None) -> Html:
    """The table of jobs (shown ones only of `profile` when given)."""
    shown = [v for v in views if profile is None or v.record.profile == profile]
    rows, ids = [], []
    for v in reversed(shown):  # newest first
        r = row(v)
        ledger = None if v.is_sweep else v.goodput
        rows.append([link(job_href(v.job_id), v.job_id), v.record.name, v.record.profile, v.recipe, v.record.layout,
                     state_cell(v), progress_cell(r.step, r.max_steps), num(r.loss), gantt.sparkline(r.losses),
                     rate(r.tokens_per_s), percent(ledger["goodput"] if ledger else None),
                     "" if r.eta_s is None or r.finished else words.seconds(r.eta_s),
                     v.status.elapsed or "", v.record.submitted_at.replace("T", " ")[:16]])
        ids.append(v.job_id)
    if not rows:
        return section("jobs", "Jobs", tag("p", "no jobs recorded yet: hpclaunch submit RECIPE --profile PROFILE"))
    headers = ["job", "name", "profile", "recipe", "layout", "state", "progress", "last loss", "loss", "tok/s",
               "goodput", "ETA", "elapsed", "submitted"]
    return section("jobs", f"Jobs ({len(rows)})", table(headers, rows, row_ids=ids))


def jobs(query: Mapping[str, str]) -> Answer:
    """The jobs of every profile, newest first: state (a pending one's reason and expected start), progress, last
    loss and its trend, throughput, goodput; links to each job. `?profile=NAME`: that profile's only."""
    listed = api.jobs(0 if query.get("all") else JOBS_LIMIT)
    profiles = sorted({v.record.profile for v in listed.items})
    profile = query.get("profile")
    if profile is not None and profile not in profiles:
        profile = None
    filters = join([link("/", "all profiles", class_="chip" + (" on" if profile is None else "")),
                    *(link("/?" + urlencode({"profile": p}), p, class_="chip" + (" on" if p == profile else ""))
                      for p in profiles)], " ")
    body = join([tag("p", filters, class_="filters"), notes(listed.notes), jobs_section(listed.items, profile)])
    live = "/live" + ("?" + urlencode({"profile": profile}) if profile else "")
    return 200, page("Jobs", body, live=live, refresh=True)


def jobs_live(query: Mapping[str, str]) -> dict[str, Any]:
    listed = api.jobs(0 if query.get("all") else JOBS_LIMIT)
    profile = query.get("profile")
    return {"sections": {"jobs": jobs_section(listed.items, profile or None)}, "finished": False}


def notes(found: Sequence[str]) -> Html:
    return join(tag("p", n.removeprefix("hpclaunch: "), class_="note") for n in found)


def failed(exc: HpclaunchError, title: str = "Not shown") -> Answer:
    """A page that could not be made: the error in words, with its hint, as the CLI says it."""
    status = 404 if isinstance(exc, NotFoundError) else 400
    body = tag("div", join([tag("p", exc.message), tag("p", f"hint: {exc.hint}", class_="muted") if exc.hint else ""]),
               class_="error")
    return status, page(title, body)


# --- plan


def _choice(name: str, options: Sequence[str], chosen: str | None, *, blank: str | None = None) -> Html:
    opts = [tag("option", blank, value="")] if blank is not None else []
    opts += [tag("option", o, value=o, selected=o == chosen) for o in options]
    return tag("label", join([f"{name} ", tag("select", join(opts), name=name)]))


def memory_bar(data: Mapping[str, Any]) -> Html:
    """The memory per device as a stacked bar against the device's memory."""
    parts = [(k, float(data.get(f"{k}_gib") or 0.0)) for k in ("params", "grads", "optimizer", "activations",
                                                               "buffers", "reserve")]
    total = max(float(data.get("device_gib") or 0.0), sum(v for _, v in parts))
    keys = join(tag("span", f"{k} {v:.2f} GiB", class_=f"key {k}") for k, v in parts if v)
    return join([gantt.stacked(parts, total), tag("p", keys, class_="legend")])


def plan(query: Mapping[str, str]) -> Answer:
    """The memory plan of a recipe on a profile (a form of the recipes and profiles found; preset and layout);
    nothing is fetched (a model's config that is not in the store is said so)."""
    recipes = [r for r in api.recipes().items if r.error is None]
    profiles = [p.name for p in api.profiles().items if p.error is None]
    recipe = query.get("recipe") if query.get("recipe") in {r.name for r in recipes} else None
    entry = next((r for r in recipes if r.name == recipe), None)
    preset = query.get("preset") if entry and query.get("preset") in entry.presets else None
    profile = query.get("profile") if query.get("profile") in profiles else None
    layout = query.get("layout", "").strip()
    form = tag("form", join([
        _choice("recipe", [r.name for r in recipes], recipe),
        _choice("preset", list(entry.presets) if entry else [], preset, blank="(default)"),
        _choice("profile", profiles, profile, blank="(default)"),
        tag("label", join(["layout ", tag("input", "", name="layout", value=layout, placeholder="2n8g", size=6)])),
        tag("button", "plan", type="submit")]), method="get", action="/plan", class_="ask")
    out: list[object] = [form]
    if recipe:
        if layout and not LAYOUT.match(layout):
            out.append(tag("div", f"layout {layout!r} is not NODESnGPUSg (e.g. 2n8g)", class_="error"))
        else:
            try:
                planned = api.plan(recipe, profile, preset=preset, layout=layout or None, fetch=False)
            except HpclaunchError as exc:
                out.append(tag("div", join([tag("p", exc.message), tag("p", f"hint: {exc.hint}", class_="muted")
                                            if exc.hint else ""]), class_="error"))
            else:
                data = planned.to_json()
                verdict = {True: ("fits", "ok"), False: ("does NOT fit", "bad"), None: ("not checked", "wait")}
                said, kind = verdict[data.get("fits")]
                out += [tag("p", join([tag("span", said, class_=f"state {kind}"),
                                       f" {data.get('per_device_gib', 0):.2f} GiB per device"
                                       + (f" of {data['device_gib']:g}" if data.get("device_gib") else "")]),
                            id="verdict"),
                        memory_bar(data), notes(planned.notes), tag("pre", "\n".join(planned.lines()))]
    return 200, page("Plan", join(out))


# --- availability


def avail(query: Mapping[str, str]) -> Answer:
    """Devices free and in all, nodes idle and down, per partition of a profile (default: the user's default
    profile, else every profile found); with a layout, when a job of that shape would start."""
    profiles = [p.name for p in api.profiles().items if p.error is None]
    profile = query.get("profile") if query.get("profile") in profiles else None
    layout = query.get("layout", "").strip()
    form = tag("form", join([
        _choice("profile", profiles, profile, blank="(default)"),
        tag("label", join(["layout ", tag("input", "", name="layout", value=layout, placeholder="2n8g", size=6)])),
        tag("button", "ask", type="submit")]), method="get", action="/avail", class_="ask")
    shape = layout if LAYOUT.match(layout) else None
    try:
        found = api.avail([profile] if profile else [], layout=shape)
    except HpclaunchError as exc:
        return failed(exc, "Availability")
    rows = []
    for p in found.partitions:
        free = p.devices_free
        bar = gantt.stacked([("free", float(free)), ("used", float(p.devices - free))], float(p.devices), 160) \
            if free is not None and p.devices else ""
        rows.append([p.profile, p.partition, p.device_type,
                     "?" if free is None else f"{free}/{p.devices}", bar,
                     "?" if p.nodes_idle is None else f"{p.nodes_idle}/{p.nodes}", "" if p.down is None else p.down,
                     "" if p.cost_per_device_hour is None else f"{p.cost_per_device_hour:g}"])
    body: list[object] = [form, notes(found.notes)]
    if layout and shape is None:
        body.append(tag("div", f"layout {layout!r} is not NODESnGPUSg (e.g. 2n8g)", class_="error"))
    body.append(section("partitions", "Partitions", table(
        ["profile", "partition", "device", "devices free", "", "nodes idle", "down", "cost / device-hour"], rows)))
    if found.estimates:
        body.append(section("estimates", f"A {shape} job would start", table(
            ["profile", "partition", "starts", "cost / hour"],
            [[e.profile, e.partition, e.start or "?", "" if e.cost_per_hour is None else f"{e.cost_per_hour:g}"]
             for e in found.estimates])))
    return 200, page("Availability", join(body))


def summary_facts(v: JobView, extra: Sequence[tuple[str, object]] = ()) -> Html:
    """What a job is and where it stands, as a definition list."""
    r, s = v.record, v.status
    elapsed = (s.elapsed or "") + (f" of {s.time_limit}" if s.time_limit and s.elapsed else "")
    reason = s.reason_text or s.reason if s.reason and s.state != "COMPLETED" else None
    return facts([("state", state_cell(v)), ("reason", reason),
                  ("expected start", s.expected_start), ("recipe", f"{v.recipe} on {r.profile}, layout {r.layout}, "
                                                                   f"{r.launcher}"),
                  ("name", r.name), ("submitted", r.submitted_at), ("nodes", s.nodes), ("elapsed", elapsed),
                  ("stopped by hpclaunch", v.stop_reason), *extra, ("run directory", r.run_dir),
                  ("provenance", v.provenance)])
