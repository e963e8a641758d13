"""`hpclaunch ui --profile REMOTE` (hpclaunch/ui/tunnel.py, docs/ui.md): the view run on a profile's login node and
reached here through an SSH tunnel, against two sshds of the test's own on loopback (key-only, host keys checked,
as scripts/dev-sshd.sh makes the dev cluster's login): one that lets a client forward a port to its 127.0.0.1 (the
page answers through the tunnel, with the token; Ctrl-C ends the view there too), one that refuses to forward
(AllowTcpForwarding no: said in words, exit 2, nothing left running there)."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"

pytestmark = pytest.mark.skipif(not (Path(SSHD).exists() and shutil.which("ssh") and os.geteuid() == 0),
                                reason="needs OpenSSH's sshd and root (scripts/dev-sshd.sh installs it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _sshd(folder: Path, forwarding: str) -> tuple[int, subprocess.Popen[bytes]]:
    folder.mkdir(mode=0o700)
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    shutil.copy(folder / "client.pub", folder / "authorized_keys")
    port = _free_port()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {(folder / 'host.pub').read_text().split(' ')[0]} "
                                        f"{(folder / 'host.pub').read_text().split(' ')[1]}\n")
    permit = "PermitOpen 127.0.0.1:*\n" if forwarding != "no" else ""
    (folder / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {folder}/host\nPidFile {folder}/sshd.pid\n"
        f"AuthorizedKeysFile {folder}/authorized_keys\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
        f"KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
        f"AllowTcpForwarding {forwarding}\n{permit}X11Forwarding no\nSetEnv PATH={os.environ['PATH']}\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-f", str(folder / "sshd_config"), "-E", str(folder / "sshd.log")])
    end = time.monotonic() + 20
    while not _listening(port):
        assert proc.poll() is None and time.monotonic() < end, (folder / "sshd.log").read_text()
        time.sleep(0.1)
    return port, proc


@pytest.fixture(scope="module")
def logins(tmp_path_factory: pytest.TempPathFactory):
    """Two login nodes (sshds): "open" forwards a port to its 127.0.0.1, "closed" does not; a profile for each, a
    login-side home with one job record."""
    root = tmp_path_factory.mktemp("ui-tunnel")
    profiles = root / "path" / "cluster_profiles"
    profiles.mkdir(parents=True)
    dev = (REPO / "cluster_profiles" / "dev-slurm-ssh.yaml").read_text()
    procs = []
    for name, forwarding in (("open", "local"), ("closed", "no")):
        port, proc = _sshd(root / name, forwarding)
        procs.append(proc)
        text = (dev.replace("port: 2222", f"port: {port}")
                .replace("/var/lib/hpclaunch-dev-sshd/client_ed25519", str(root / name / "client"))
                .replace("/var/lib/hpclaunch-dev-sshd/known_hosts", str(root / name / "known_hosts")))
        assert text.count(str(root / name)) == 2
        (profiles / f"login-{name}.yaml").write_text(text)
    there = root / "there"
    (there / "registry").mkdir(parents=True)
    env = {**os.environ, "HPCLAUNCH_PATH": str(profiles.parent), "HPCLAUNCH_HOME": str(root / "here"),
           "XDG_CONFIG_HOME": str(root / "xdg")}
    remote = f"env HPCLAUNCH_HOME={there} {sys.executable} -m hpclaunch.cli.main"
    try:
        yield {"env": env, "remote": remote}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def _ui(logins: dict, profile: str, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hpclaunch.cli.main", "ui", "--profile", profile, "--port",
                             str(port), "--remote-command", logins["remote"]], env=logins["env"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _get(port: int, path: str, cookie: str = "") -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **({"Cookie": cookie} if cookie else {})})
    res = conn.getresponse()
    out = res.status, {k.lower(): v for k, v in res.getheaders()}, res.read().decode()
    conn.close()
    return out


def test_the_view_on_the_login_node_through_the_tunnel(logins):
    local = _free_port()
    proc = _ui(logins, "login-open", local)
    try:
        assert proc.stdout is not None
        head = proc.stdout.readline()
        url = proc.stdout.readline().strip()
        tunnel = proc.stdout.readline()
        assert head.startswith("hpclaunch ui: the jobs of root@127.0.0.1:"), head + proc.stderr.read()
        assert url.startswith(f"http://127.0.0.1:{local}/?token=") and "-L 127.0.0.1:" in tunnel
        there = int(head.split("served there on 127.0.0.1:")[1].split(";")[0])
        assert _get(local, "/")[0] == 403  # the token is asked for through the tunnel too
        status, headers, _ = _get(local, url.split(str(local), 1)[1])
        assert status == 303 and "HttpOnly" in headers["set-cookie"]
        status, _, page = _get(local, "/", headers["set-cookie"].split(";")[0])
        assert status == 200 and "<h1>Jobs" in page
        assert _listening(there)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    end = time.monotonic() + 20
    while _listening(there) or _listening(local):  # the view there ended with the connection, the tunnel too
        assert time.monotonic() < end, "the view or the tunnel is still up after Ctrl-C"
        time.sleep(0.2)


def test_a_login_node_that_refuses_to_forward_is_said_in_words(logins):
    local = _free_port()
    proc = _ui(logins, "login-closed", local)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    assert "refuses to forward the port" in err and "AllowTcpForwarding" in err and "Traceback" not in err
    time.sleep(1)
    assert not _listening(local)
    leftover = subprocess.run(["pgrep", "-f", "--", f"tunnel-port {local}"], capture_output=True, text=True).stdout
    assert not leftover.strip(), f"the view is still running on the login node: {leftover}"
