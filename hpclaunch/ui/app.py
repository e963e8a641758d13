"""The view's Starlette app: each route to its page (pages.py, jobpage.py), the JSON that ui.js polls, the static
files by name (STATIC: nothing else of the package is served), all behind the guard (guard.py). The pages call
the api, which blocks (a scheduler call, files): Starlette runs each in its thread pool."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from hpclaunch.api import encode
from hpclaunch.errors import HpclaunchError
from hpclaunch.ui import jobpage, pages
from hpclaunch.ui.guard import Guard, GuardMiddleware

# the files served under /static/, by name, with their media types
STATIC = {"ui.js": "text/javascript; charset=utf-8", "ui.css": "text/css; charset=utf-8",
          "uPlot.iife.min.js": "text/javascript; charset=utf-8", "uPlot.min.css": "text/css; charset=utf-8"}


def _query(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.query_params.items()}


def _html(make: Callable[..., tuple[int, str]], *args: Any) -> HTMLResponse:
    """A page, or the page that says why it could not be made."""
    try:
        status, text = make(*args)
    except HpclaunchError as exc:
        status, text = pages.failed(exc)
    return HTMLResponse(text, status_code=status)


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(encode.plain(data)), status_code=status, media_type="application/json")


def _json_failed(exc: HpclaunchError) -> Response:
    from hpclaunch.errors import NotFoundError

    return _json({"error": exc.message, "hint": exc.hint}, 404 if isinstance(exc, NotFoundError) else 400)


def jobs(request: Request) -> Response:
    return _html(pages.jobs, _query(request))


def jobs_live(request: Request) -> Response:
    try:
        return _json(pages.jobs_live(_query(request)))
    except HpclaunchError as exc:
        return _json_failed(exc)


def job(request: Request) -> Response:
    return _html(jobpage.job, request.path_params["job"], _query(request))


def job_live(request: Request) -> Response:
    try:
        return _json(jobpage.live(request.path_params["job"], _query(request)))
    except HpclaunchError as exc:
        return _json_failed(exc)


def chart(request: Request) -> Response:
    try:
        return _json(jobpage.chart(request.path_params["job"], request.path_params["name"], _query(request)))
    except HpclaunchError as exc:
        return _json_failed(exc)


def plan(request: Request) -> Response:
    return _html(pages.plan, _query(request))


def avail(request: Request) -> Response:
    return _html(pages.avail, _query(request))


def _static_files() -> dict[str, bytes]:
    folder = resources.files("hpclaunch.ui") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC}


def build(guard: Guard) -> Starlette:
    """The app: its routes behind the guard."""
    files = _static_files()

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in files:
            return PlainTextResponse("not found\n", status_code=404)
        return Response(files[name], media_type=STATIC[name], headers={"cache-control": "private, max-age=300"})

    routes = [Route("/", jobs), Route("/live", jobs_live), Route("/job/{job}", job),
              Route("/job/{job}/live", job_live), Route("/job/{job}/chart/{name}", chart),
              Route("/plan", plan), Route("/avail", avail), Route("/static/{name}", static)]
    return Starlette(routes=routes, middleware=[Middleware(GuardMiddleware, guard=guard)])
