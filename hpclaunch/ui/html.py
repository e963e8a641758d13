"""HTML for the pages, escaped by default: `Html` is markup this package wrote; anything else (a job's name, a log
line, an error message) is text and escaped where it goes in (`h`, `tag`, `table`). The page frame (`page`): the
stylesheets and scripts of the view itself, the navigation, and for a page that changes while jobs run a refresh
that needs no JavaScript (a <noscript> meta refresh; ui.js polls instead where it runs)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence

# how often a changing page refreshes itself without JavaScript, and ui.js polls it (`hpclaunch ui --interval`:
# one view per process, set once before it serves)
REFRESH_S = 10


class Html(str):
    """Markup written here (safe to put in a page as it is); `+` keeps it markup and escapes text added to it."""

    def __add__(self, other: object) -> Html:
        return Html(str.__add__(self, h(other)))


def h(value: object) -> Html:
    """`value` as it goes into a page: markup as it is, anything else escaped (None: empty)."""
    if isinstance(value, Html):
        return value
    return Html("" if value is None else html.escape(str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(sep.join(h(p) for p in parts))


def tag(element: str, content: object = "", /, **attrs: object) -> Html:
    """<element attrs>content</element>; attribute values escaped (`class_` for class, `data_x` for data-x; None or
    False left out, True as the bare name)."""
    words = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        words.append(f" {attr}" if value is True else f' {attr}="{h(value)}"')
    return Html(f"<{element}{''.join(words)}>{h(content)}</{element}>")


def link(href: str, text: object, **attrs: object) -> Html:
    return tag("a", text, href=href, **attrs)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, class_: str = "grid",
          row_ids: Sequence[str] | None = None) -> Html:
    """A table of text cells (markup where a cell is Html)."""
    head = join(tag("th", x) for x in headers)
    body = []
    for i, r in enumerate(rows):
        rid = row_ids[i] if row_ids is not None and i < len(row_ids) else None
        body.append(tag("tr", join(tag("td", c) for c in r), data_row=rid))
    return tag("table", Html(f"<thead><tr>{head}</tr></thead><tbody>{join(body)}</tbody>"), class_=class_)


def facts(pairs: Iterable[tuple[str, object]]) -> Html:
    """A definition list of the pairs whose value is not empty."""
    return tag("dl", join(Html(tag("dt", k) + tag("dd", v)) for k, v in pairs if v not in (None, "")),
               class_="facts")


def section(sid: str, title: str, content: object) -> Html:
    """A section that a live update may replace whole (its id)."""
    return tag("section", Html(tag("h2", title) + h(content)), id=sid)


def empty(sid: str) -> Html:
    """A section with nothing to show yet, in its place for a live update that brings it."""
    return tag("section", "", id=sid, hidden=True)


def state_badge(state: str) -> Html:
    kind = {"COMPLETED": "ok", "RUNNING": "run", "PENDING": "wait", "REQUEUED": "wait", "CONFIGURING": "wait"}
    return tag("span", state, class_=f"state {kind.get(state.split()[0] if state else '', 'bad')}")


NAV = (("/", "Jobs"), ("/avail", "Availability"), ("/plan", "Plan"))


def page(title: str, body: object, *, live: str | None = None, refresh: bool = False,
         data: Mapping[str, object] | None = None, charts: bool = False) -> str:
    """A whole page. `live`: the URL ui.js polls for this page's changing sections (and `refresh`: the page
    reloads itself every REFRESH_S seconds when JavaScript is off); `charts`: it draws curves (uPlot)."""
    head = [Html('<meta charset="utf-8">'), Html('<meta name="viewport" content="width=device-width, '
                                                 'initial-scale=1">'),
            Html('<meta name="referrer" content="no-referrer">'), tag("title", f"{title} - hpclaunch"),
            Html('<link rel="stylesheet" href="/static/ui.css">')]
    if charts:
        head += [Html('<link rel="stylesheet" href="/static/uPlot.min.css">'),
                 Html('<script src="/static/uPlot.iife.min.js" defer></script>')]
    head.append(Html('<script src="/static/ui.js" defer></script>'))
    if refresh:
        head.append(Html(f'<noscript><meta http-equiv="refresh" content="{REFRESH_S}"></noscript>'))
    nav = join(link(href, text) for href, text in NAV)
    attrs = {"data_live": live, "data_interval": REFRESH_S if live else None,
             **{f"data_{k}": v for k, v in (data or {}).items()}}
    footer = Html("read-only view of your own jobs, served on this machine's loopback only &middot; ") + link(
        "", "reload")
    body_html = tag("body", Html(tag("header", Html(tag("a", "hpclaunch", href="/", class_="brand") + tag(
        "nav", nav))) + tag("main", Html(tag("h1", title) + h(body))) + tag("footer", footer)), **attrs)
    return "<!doctype html>\n" + tag("html", Html(tag("head", join(head)) + body_html), lang="en")
