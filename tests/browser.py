"""One headless Chromium (Debian's `chromium`) for the web view's tests, driven through the Chrome DevTools Protocol
over a pipe (`--remote-debugging-pipe`: JSON messages ending in a NUL byte on file descriptors 3 and 4), so no
websocket library and no port: every page of a test file is a tab of the same browser.

    with Browser() as browser:
        page = browser.page()
        page.goto("http://127.0.0.1:8765/?token=...")
        page.wait_for("document.querySelector('svg.gantt rect')")
        page.screenshot(Path("docs/ui-job.png"))

`Browser(resolve={"evil.test": "127.0.0.1"})` maps a name to an address inside the browser (a name that points at
loopback, as DNS rebinding makes one). `page(javascript=False)`: a tab with JavaScript off; `page(isolated=True)`: a
tab without the cookies of the others. `Page.query` reads the DOM through the protocol (JavaScript off too)."""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class BrowserError(RuntimeError):
    pass


def _high(fds: tuple[int, int]) -> tuple[int, int]:
    """The pipe's ends as descriptors above 9, so that bash's `3<&N 4>&M` cannot close one it moves (bash: dash
    reads a one-digit descriptor only)."""
    import fcntl

    out = []
    for fd in fds:
        out.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return out[0], out[1]


class Browser:
    def __init__(self, *, width: int = 1280, height: int = 900, resolve: dict[str, str] | None = None) -> None:
        if CHROMIUM is None:
            raise BrowserError("no chromium on PATH (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="hpclaunch-chromium-")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                 "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--metrics-recording-only", "--mute-audio",
                 "--hide-scrollbars", "--force-device-scale-factor=1", f"--window-size={width},{height}",
                 f"--user-data-dir={self.profile}"]
        if resolve:
            flags.append("--host-resolver-rules=" + ", ".join(f"MAP {n} {a}" for n, a in resolve.items()))
        to_r, to_w = _high(os.pipe())
        from_r, from_w = _high(os.pipe())
        cmd = f"exec {shlex.join([CHROMIUM, *flags, 'about:blank'])} 3<&{to_r} 4>&{from_w} {to_r}<&- {from_w}>&-"
        self.proc = subprocess.Popen(["bash", "-c", cmd], pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._out = os.fdopen(to_w, "wb", buffering=0)
        self._in = os.fdopen(from_r, "rb", buffering=0)
        self._next = 0
        self._lock = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.version = self.send("Browser.getVersion")["product"]

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self._in.read(65536)
            if not chunk:
                with self._lock:
                    self._lock.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._lock:
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._lock.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._out.write(json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        with self._lock:
            while mid not in self._answers:
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise BrowserError(f"{method}: no answer from chromium within {timeout:g} s")
                self._lock.wait(min(left, 0.5))
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def wait_event(self, method: str, session: str, since: int, timeout: float = 60.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                for e in self.events[since:]:
                    if e.get("method") == method and e.get("sessionId") == session:
                        return e
                left = end - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"no {method} within {timeout:g} s")
                self._lock.wait(min(left, 0.5))

    def page(self, *, javascript: bool = True, isolated: bool = False) -> Page:
        """A new tab; `isolated`: in a browser context of its own (no cookies of the other tabs)."""
        params: dict[str, Any] = {"url": "about:blank"}
        if isolated:
            params["browserContextId"] = self.send("Target.createBrowserContext")["browserContextId"]
        target = self.send("Target.createTarget", params)["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        self.send("Network.enable", session=session)
        if not javascript:
            self.send("Emulation.setScriptExecutionDisabled", {"value": True}, session=session)
        return Page(self, session, target)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except BrowserError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, target: str) -> None:
        self.browser, self.session, self.target = browser, session, target

    def send(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session, **kw)

    def goto(self, url: str, timeout: float = 60.0) -> None:
        """Open `url` and wait for its load event."""
        since = len(self.browser.events)
        self.send("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session, since, timeout)

    def evaluate(self, expression: str) -> Any:
        found = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in found:
            raise BrowserError(f"{expression}: {found['exceptionDetails'].get('text')} "
                               f"{found['exceptionDetails'].get('exception', {}).get('description', '')}")
        return found["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """Evaluate `expression` until it is truthy; its value (JSON: an element found is `{}`, which is falsy
        here; write `!!document.querySelector(...)`)."""
        end = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > end:
                raise BrowserError(f"still false after {timeout:g} s: {expression}")
            time.sleep(0.2)

    def query(self, selector: str) -> list[str]:
        """The outer HTML of the elements `selector` finds, read through the protocol (works with JavaScript off)."""
        root = self.send("DOM.getDocument", {"depth": -1, "pierce": False})["root"]["nodeId"]
        found = self.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"]
        return [self.send("DOM.getOuterHTML", {"nodeId": n})["outerHTML"] for n in found]

    def loads(self) -> int:
        """How many times a page finished loading in this tab so far."""
        return sum(1 for e in self.browser.events
                   if e.get("sessionId") == self.session and e.get("method") == "Page.loadEventFired")

    def mark(self) -> int:
        """Where the browser's events are now (for `responses(..., since=...)`)."""
        return len(self.browser.events)

    def responses(self, url_part: str, since: int = 0) -> list[int]:
        """The HTTP statuses of the responses this tab received for URLs containing `url_part` (`since`: after a
        `mark`)."""
        return [e["params"]["response"]["status"] for e in self.browser.events[since:]
                if e.get("sessionId") == self.session and e.get("method") == "Network.responseReceived"
                and url_part in e["params"]["response"]["url"]]

    def screenshot(self, path: Path, *, selector: str | None = None, max_height: int = 2400) -> Path:
        """A PNG of the whole page (or of one element), at most `max_height` pixels tall."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True}
        box = self.evaluate(
            "(() => { const e = " + (f"document.querySelector({json.dumps(selector)})" if selector
                                     else "document.documentElement") +
            "; const r = e.getBoundingClientRect(); return [r.x + window.scrollX, r.y + window.scrollY, "
            "Math.max(r.width, e.scrollWidth), Math.max(r.height, e.scrollHeight)]; })()")
        x, y, w, h = box
        params["clip"] = {"x": x, "y": y, "width": w, "height": min(h, max_height), "scale": 1}
        data = self.send("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
