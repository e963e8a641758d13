"""Every request's checks before a page is made, as an ASGI middleware, in this order:

1. **Host**: `127.0.0.1:PORT` or `localhost:PORT` (and the port an SSH tunnel forwards, `--tunnel-port`), nothing
   else: a page of another site whose name was made to point at 127.0.0.1 (DNS rebinding) sends its own name.
2. **Cross-site**: a request another site's page made is refused: `Sec-Fetch-Site` other than `same-origin` or
   `none` (typed, a bookmark, a link from the terminal), or an `Origin` other than this view's own.
3. **Read-only**: GET and HEAD only.
4. **The token**, printed when the view starts (as Jupyter does): given once as `?token=`, it is answered with a
   cookie (HttpOnly: no script reads it; SameSite=Strict: no other site's request carries it; Path=/) and a
   redirect to the same page without it (so it leaves the address bar and the history); later requests carry the
   cookie. Compared with `hmac.compare_digest`.

Every answer, a refusal too, carries headers that keep the page to itself: a Content-Security-Policy that lets it
load and connect only to itself (no CDN, no font, no frame, no form sent elsewhere), no referrer, no sniffing, no
caching of pages, no framing."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
SAFE_METHODS = ("GET", "HEAD")
SAME_SITE = ("same-origin", "none")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"referrer-policy", b"no-referrer"),
           (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-resource-policy", b"same-origin")]


@dataclass(frozen=True)
class Guard:
    """What a request must show: the token, and the ports it may be addressed to (the view's own; the laptop's
    end of an SSH tunnel)."""

    token: str
    ports: tuple[int, ...]

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port (a browser sends a host's cookies to all its ports)."""
        return f"hpclaunch-ui-{self.ports[0]}"

    def hosts(self) -> set[str]:
        return {f"{name}:{port}" for name in LOOPBACK_NAMES for port in self.ports}

    def origins(self) -> set[str]:
        return {f"http://{host}" for host in self.hosts()}

    def valid(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def refusal(self, headers: dict[str, str], method: str) -> tuple[int, str] | None:
        """(status, why) when the request is refused before its token is looked at; None when it may go on."""
        if headers.get("host", "") not in self.hosts():
            return 403, "this view answers only requests to 127.0.0.1 or localhost at its own port"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in SAME_SITE:
            return 403, f"a request made by another site's page ({site}) is refused"
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins():
            return 403, "a request from another origin is refused"
        if method not in SAFE_METHODS:
            return 405, "this view is read-only: GET only"
        return None


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers (the first of each name; a repeated Host is refused as no known host)."""
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name == "host" and name in out:
            out[name] = ""
        out.setdefault(name, value.decode("latin-1"))
    return out


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class GuardMiddleware:
    """The checks of the module's docstring around the view's app."""

    def __init__(self, app: App, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        headers = _headers(scope)
        refused = self.guard.refusal(headers, scope.get("method", ""))
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        if refused is None and given is not None:
            if not self.guard.valid(given):
                refused = (403, "wrong token: open the URL that `hpclaunch ui` printed")
            else:  # the token once in the URL: a cookie from now on, and the URL without it
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                # one leading slash, quoted: never `//other.site`, which a browser would leave for
                where = "/" + quote(str(scope.get("path", "/")).lstrip("/\\")) + (f"?{rest}" if rest else "")
                cookie = f"{self.guard.cookie}={self.guard.token}; HttpOnly; SameSite=Strict; Path=/"
                await _answer(send, 303, "", [(b"location", where.encode("latin-1")),
                                              (b"set-cookie", cookie.encode())])
                return
        if refused is None and not self.guard.valid(_cookie(headers.get("cookie", ""), self.guard.cookie)):
            refused = (403, "no token: open the URL with ?token= that `hpclaunch ui` printed")
        if refused is not None:
            await _answer(send, *refused)
            return

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in HEADERS if k not in names]
                if b"cache-control" not in names:
                    extra.append((b"cache-control", b"no-store"))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_guarded)


async def _answer(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (f"hpclaunch ui: {text}\n" if text else "").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"),
                            *HEADERS, *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
