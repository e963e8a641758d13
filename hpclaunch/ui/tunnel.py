"""`hpclaunch ui --profile REMOTE`, run on a laptop: the view of the jobs on a profile's login node (`remote:`),
served there and reached here through an SSH tunnel.

1. `hpclaunch ui` starts on the login node over the profile's SSH connection (host key checked, never a prompt:
   hpclaunch/core/remote.py), on a free port of its own 127.0.0.1, told to answer requests addressed to this
   laptop's port too (`--tunnel-port`); it stops when this command's connection closes (its stdin ends);
2. its URL (port and token) is read from what it prints;
3. a second ssh, a connection of its own, forwards 127.0.0.1:PORT here to that port there
   (`ssh -N -L 127.0.0.1:PORT:127.0.0.1:REMOTE_PORT`, ExitOnForwardFailure);
4. one request through it checks that it answers (a login node whose sshd refuses to forward ports lets ssh listen
   here all the same, and closes each connection);
5. the URL to open here is said; Ctrl-C closes both connections, and the view there ends.

The login node needs hpclaunch with the `ui` extra (`--remote-command` says how to start it there)."""

from __future__ import annotations

import http.client
import re
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

from hpclaunch import api
from hpclaunch.core.remote import SshHost, Target
from hpclaunch.errors import CommandError, ConfigError

URL = re.compile(r"http://127\.0\.0\.1:(?P<port>[0-9]+)/\?token=(?P<token>[A-Za-z0-9_-]+)")
START_S = 90  # for the view there to say its URL (hpclaunch starting on a busy login node)


def login_of(profile: str) -> SshHost:
    """The login node of a profile that has one (`remote:`)."""
    data = api.profile(profile).data
    remote = data.get("remote")
    if not remote:
        raise ConfigError(f"profile {profile} has no login node (remote:): its jobs are on this machine",
                          hint="run `hpclaunch ui` without --profile")
    return SshHost(Target.from_dict(remote))


def free_port(port: int | None) -> int:
    """`port`, or a free port here (for the tunnel's end; ssh binds it a moment later)."""
    from hpclaunch.ui.serve import bind

    sock = bind(port)
    try:
        return int(sock.getsockname()[1])
    finally:
        sock.close()


def forward_argv(host: SshHost, local: int, remote: int) -> list[str]:
    """The ssh that forwards 127.0.0.1:`local` here to 127.0.0.1:`remote` on the login node (no command)."""
    argv = host.ssh_argv(shared=False)
    return [*argv[:-2], "-N", "-o", "ExitOnForwardFailure=yes", "-L", f"127.0.0.1:{local}:127.0.0.1:{remote}",
            *argv[-2:]]


def _wait_for_url(proc: subprocess.Popen[str], host: SshHost) -> tuple[int, str]:
    """(port, token) from the first URL the view there prints; a CommandError when it ends or says nothing."""
    found: list[tuple[int, str]] = []
    seen: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line.rstrip())
            m = URL.search(line)
            if m:
                found.append((int(m["port"]), m["token"]))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=START_S)
    if found:
        return found[0]
    proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    said = " ".join((err or "\n".join(seen)).split())[-600:] or f"nothing within {START_S} s"
    raise CommandError(f"the web view did not start on {host.target.label}: {said}",
                       hint="is hpclaunch with the ui extra installed there? --remote-command says how to start "
                            "it (e.g. --remote-command ~/venv/bin/hpclaunch)")


def _wait_for_port(port: int, forward: subprocess.Popen[str], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if forward.poll() is not None:
            err = forward.stderr.read() if forward.stderr else ""
            raise CommandError(f"the SSH tunnel to port {port} did not open: {' '.join(err.split()) or 'ssh ended'}",
                               hint="give another --port (this one may be taken here)")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise CommandError(f"the SSH tunnel to port {port} did not open within {timeout:g} s")


def probe(port: int) -> None:
    """Ask the view through the tunnel for its front page (without the token: it answers 403); a CommandError when
    nothing answers, as when the login node's sshd refuses to forward ports (AllowTcpForwarding no): ssh listens
    here all the same and closes each connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        raise CommandError(f"the SSH tunnel to the view does not answer ({exc.__class__.__name__}): the login node "
                           "refuses to forward the port (its sshd: AllowTcpForwarding no, or PermitOpen)",
                           hint="ask the site whether `ssh -L` is allowed; or run `hpclaunch ui` here: jobs "
                                "submitted from this machine over SSH are read over SSH") from None
    finally:
        conn.close()
    if status != 403:
        raise CommandError(f"port {port} here answers, but not as the view ({status})")


def remote_view(profile: str, *, port: int | None = None, interval: int = 10,
                command: str = "hpclaunch") -> Iterator[str]:
    """Run the view on the profile's login node and tunnel it here; yields the lines to say, then blocks until
    Ctrl-C (or the view there ends), closing both connections."""
    host = login_of(profile)
    local = free_port(port)
    ui = [*shlex.split(command), "ui", "--interval", str(interval), "--tunnel-port", str(local)]
    # the view there ends when this connection does: `read` returns at the end of its stdin
    script = f"{shlex.join(ui)} </dev/null & p=$!; read _; kill $p 2>/dev/null; wait $p"
    view = subprocess.Popen([*host.ssh_argv(), shlex.join(["sh", "-c", script])], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    forward: subprocess.Popen[str] | None = None
    try:
        remote_port, token = _wait_for_url(view, host)
        forward = subprocess.Popen(forward_argv(host, local, remote_port), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_for_port(local, forward)
        probe(local)
        yield f"hpclaunch ui: the jobs of {host.target.label}, served there on 127.0.0.1:{remote_port}; open"
        yield f"  http://127.0.0.1:{local}/?token={token}"
        yield f"(tunnel: {shlex.join(forward_argv(host, local, remote_port))}; Ctrl-C stops both)"
        while view.poll() is None and forward.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        return
    finally:
        for proc in (forward, view):
            if proc is None:
                continue
            if proc.stdin is not None:
                proc.stdin.close()  # the view there: its `read` ends, it is stopped
            try:
                proc.wait(timeout=10 if proc is view else 0.1)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait(timeout=10)
