"""The server of the view: a port on 127.0.0.1 only (never another address: on a shared login node the other users
reach loopback too, hence the token), a new token each start (`secrets`, 256 bits), uvicorn with no access log
(the first request's URL holds the token) and no lifespan. `View.run` serves until Ctrl-C; `View.start`/`stop` in a
thread (`check`, the tests); `check` asks a started view for its jobs page, with and without its token."""

from __future__ import annotations

import errno
import http.client
import secrets
import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from hpclaunch.errors import ConfigError
from hpclaunch.ui.app import build
from hpclaunch.ui.guard import Guard

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
PORTS_TRIED = 50  # without --port: the first free one from DEFAULT_PORT on (as Jupyter does)


def bind(port: int | None) -> socket.socket:
    """A listening socket on 127.0.0.1:`port`; without one, the first free port from DEFAULT_PORT on."""
    for candidate in [port] if port is not None else range(DEFAULT_PORT, DEFAULT_PORT + PORTS_TRIED):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT; never a second listener
        try:
            sock.bind((HOST, candidate))
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE or port is not None:
                raise ConfigError(f"cannot serve on {HOST}:{candidate}: {exc.strerror}",
                                  hint="another program (or another user's view) has that port: give another "
                                       "--port, or none to take the first free one") from None
            continue
        sock.listen(64)
        return sock
    raise ConfigError(f"no free port on {HOST} from {DEFAULT_PORT} to {DEFAULT_PORT + PORTS_TRIED - 1}",
                      hint="give a --port")


@dataclass
class View:
    """A view ready to serve: its socket bound, its token made."""

    sock: socket.socket
    guard: Guard
    server: uvicorn.Server
    thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def token(self) -> str:
        return self.guard.token

    def url(self, port: int | None = None) -> str:
        """The address to open, with the token (`port`: the laptop's end of an SSH tunnel)."""
        return f"http://{HOST}:{port or self.port}/?token={self.token}"

    def run(self) -> None:
        """Serve until Ctrl-C (uvicorn's own signal handling: the connections are closed, then it returns)."""
        self.server.run(sockets=[self.sock])

    def start(self) -> None:
        """Serve in a thread; returns once the server answers."""
        self.thread = threading.Thread(target=self.run, name="hpclaunch-ui", daemon=True)
        self.thread.start()
        end = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > end:
                raise ConfigError("the web view did not start", hint="run it again; its errors are on stderr")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
        self.sock.close()


def make(port: int | None = None, tunnel_ports: tuple[int, ...] = ()) -> View:
    """A view on 127.0.0.1:`port` (see `bind`), also answering requests addressed to `tunnel_ports` (the laptop's
    end of an SSH tunnel to it)."""
    sock = bind(port)
    guard = Guard(secrets.token_urlsafe(32), (int(sock.getsockname()[1]), *tunnel_ports))
    config = uvicorn.Config(build(guard), log_level="warning", access_log=False, lifespan="off",
                            proxy_headers=False, server_header=False, timeout_graceful_shutdown=5)
    return View(sock, guard, uvicorn.Server(config))


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    try:
        conn.request("GET", path, headers={"Host": f"{HOST}:{port}", **headers})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read().decode("utf-8", "replace")
    finally:
        conn.close()


def check(view: View) -> list[tuple[str, bool]]:
    """What `hpclaunch ui --check` asks a started view: (what, whether it held)."""
    port = view.port
    no_token = _get(port, "/", {})[0]
    wrong = _get(port, "/?token=" + "x" * 43, {})[0]
    status, headers, _ = _get(port, f"/?token={view.token}", {})
    cookie = headers.get("set-cookie", "").split(";")[0]
    page_status, page_headers, page = _get(port, "/", {"Cookie": cookie})
    other_host = _get(port, "/", {"Cookie": cookie, "Host": "attacker.example:80"})[0]
    cross = _get(port, "/", {"Cookie": cookie, "Sec-Fetch-Site": "cross-site"})[0]
    return [("refuses a request without the token (403)", no_token == 403),
            ("refuses a wrong token (403)", wrong == 403),
            ("takes the token once, answers with an HttpOnly SameSite=Strict cookie",
             status == 303 and "HttpOnly" in headers.get("set-cookie", "")
             and "SameSite=Strict" in headers.get("set-cookie", "")),
            ("shows the jobs page with the cookie", page_status == 200 and "<h1>Jobs" in page),
            ("lets the page load nothing from elsewhere (Content-Security-Policy)",
             "default-src 'none'" in page_headers.get("content-security-policy", "")),
            ("refuses another Host (DNS rebinding)", other_host == 403),
            ("refuses a cross-site request", cross == 403)]
