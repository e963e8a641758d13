"""Where the cluster's commands run and its files are: this machine (`LOCAL`) or a login node over SSH (`SshHost`).

An `SshHost` runs every command over one OpenSSH connection (ControlMaster: opened by the first command, reused
by the next ones, closed by ssh itself after `IDLE_S` seconds without use), its control socket in a folder only
this user can enter (0700). The host key is checked against a known_hosts file (StrictHostKeyChecking yes): an
unknown or changed key is an error, never accepted. Nothing but the system's `ssh` is needed here; no password or
key material is ever written by hpclaunch (the identity is a path that ssh reads)."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.core import cmd
from hpclaunch.errors import CommandError, ConfigError

IDLE_S = 60  # ControlPersist: the shared connection closes after this long without a command
CONNECT_TIMEOUT_S = 15
_TARGET = re.compile(r"^(?:(?P<user>[A-Za-z_][A-Za-z0-9_.-]*)@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:]+\])"
                     r"(?::(?P<port>[0-9]{1,5}))?$")
REMOTE_HINT = "write it as user@host or user@host:port (e.g. --remote alice@login.cluster.org:22)"


@dataclass(frozen=True)
class Target:
    """Where to log in: the profile's `remote:` keys, or `--remote user@host[:port]`."""

    host: str
    user: str | None = None
    port: int = 22
    identity: str | None = None  # a private key file ssh reads (-i); None: ssh's own defaults and agent
    known_hosts: str | None = None  # None: ssh's own (~/.ssh/known_hosts)

    @property
    def label(self) -> str:
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}" + (f":{self.port}" if self.port != 22 else "")

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "user": self.user, "port": self.port, "identity": self.identity,
                "known_hosts": self.known_hosts}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Target:
        port = data.get("port") or 22
        return cls(host=str(data["host"]), user=_opt(data.get("user")), port=int(str(port)),
                   identity=_opt(data.get("identity")), known_hosts=_opt(data.get("known_hosts")))


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def parse_target(text: str, *, identity: str | None = None, known_hosts: str | None = None) -> Target:
    """`user@host[:port]` as a Target; a ConfigError naming --remote for anything else (an option, a space)."""
    m = _TARGET.match(text.strip())
    if not m or text.strip().startswith("-"):
        raise ConfigError(f"{text!r} is not a login address", key="--remote", hint=REMOTE_HINT)
    port = int(m.group("port") or 22)
    if not 1 <= port <= 65535:
        raise ConfigError(f"{text!r}: port {port} is not between 1 and 65535", key="--remote", hint=REMOTE_HINT)
    return Target(host=m.group("host"), user=m.group("user"), port=port, identity=identity, known_hosts=known_hosts)


#: a socket's path has at most ~104 bytes: the folder, "/", %C (40) and the suffix ssh adds while it binds (17)
CONTROL_DIR_MAX = 104 - 1 - 40 - 17


def control_dir() -> Path:
    """The folder of the control sockets: $XDG_RUNTIME_DIR/hpclaunch-ssh, else (or when that path is too long for a
    socket) <tmp>/hpclaunch-ssh-<uid>, else /tmp/hpclaunch-ssh-<uid>; made 0700 and refused when another user owns
    it or others may enter it (a socket there would hand them the connection)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    mine = f"hpclaunch-ssh-{os.getuid()}"
    choices = [Path(base) / "hpclaunch-ssh"] if base else []
    choices += [Path(tempfile.gettempdir()) / mine, Path("/tmp") / mine]
    folder = next((c for c in choices if len(str(c)) <= CONTROL_DIR_MAX), choices[-1])
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise CommandError(f"{folder} is not a private folder of this user (mode {stat.filemode(info.st_mode)}): "
                           "it cannot hold the SSH control socket",
                           hint=f"remove it (rm -rf {folder}) and run the command again")
    return folder


class LocalHost:
    """This machine: commands through the command-runner seam, files through the filesystem."""

    remote = False

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float = 60.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        return cmd.run(argv, input=input, timeout=timeout, check=check)

    def require(self, program: str) -> None:
        cmd.require(program)

    def read_text(self, path: Path) -> str:
        return path.read_text(encoding="utf-8")


LOCAL = LocalHost()


class SshHost:
    """A login node reached over one multiplexed SSH connection; `run` has the signature of `LocalHost.run`."""

    remote = True

    def __init__(self, target: Target):
        self.target = target

    def ssh_argv(self, *, tty: bool = False, shared: bool = True) -> list[str]:
        """ssh and its options (no command): the shared connection (`shared=False`: a connection of its own, for
        a tunnel that lives as long as its ssh), host keys checked, never a prompt."""
        t = self.target
        mux = (["-o", "ControlMaster=auto", "-o", f"ControlPath={control_dir()}/%C", "-o", f"ControlPersist={IDLE_S}"]
               if shared else ["-o", "ControlMaster=no", "-o", "ControlPath=none"])
        argv = ["ssh", "-T" if not tty else "-t", "-p", str(t.port),
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                *mux, "-o", "LogLevel=ERROR"]
        if t.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={_local_path(t.known_hosts)}"]
        if t.identity:
            key = _local_path(t.identity)
            if not key.is_file():
                raise ConfigError(f"the identity file {key} does not exist", key="remote.identity",
                                  hint="give the path of the private key ssh logs in with (ssh-keygen makes one)")
            argv += ["-o", "IdentitiesOnly=yes", "-i", str(key)]
        return [*argv, *(["-l", t.user] if t.user else []), "--", t.host]

    def command(self, argv: Sequence[str]) -> list[str]:
        """The local argv that runs `argv` on the login node (its words quoted for the login shell)."""
        return [*self.ssh_argv(), shlex.join(argv)]

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float = 60.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `argv` on the login node. A failure to log in (exit 255) is always an error, in words."""
        proc = cmd.run(self.command(argv), input=input, timeout=timeout, check=False)
        if proc.returncode == 255:
            raise self.login_error(proc.stderr)
        if check and proc.returncode != 0:
            err = (proc.stderr or proc.stdout).strip()
            raise CommandError(f"`{shlex.join(argv)}` on {self.target.label} failed with exit code "
                               f"{proc.returncode}: {err}")
        return proc

    def login_error(self, stderr: str) -> CommandError:
        err = " ".join(stderr.split()) or "ssh exited with 255"
        where = f"cannot log in to {self.target.label}: {err}"
        if "host key" in err.lower() or "known_hosts" in err.lower():
            kh = self.target.known_hosts or "~/.ssh/known_hosts"
            return CommandError(where, hint=f"the login node's host key is not in {kh}: check its fingerprint with "
                                            "the site and add it (ssh-keyscan ... >> known_hosts); hpclaunch never "
                                            "accepts an unknown key")
        return CommandError(where, hint="check the host, port, user and identity (the profile's remote: keys or "
                                        "--remote), and that `ssh` to it works without a password prompt")

    def require(self, program: str) -> None:
        """Log in (opening the shared connection) and check that `program` is on the login node's PATH."""
        proc = self.run(["sh", "-c", f"command -v {shlex.quote(program)}"], check=False)
        if proc.returncode != 0:
            raise CommandError(f"command not found on {self.target.label}: {program}",
                               hint="is it a Slurm login node? hpclaunch runs the scheduler's commands there")

    def read_text(self, path: Path) -> str:
        return self.run(["cat", "--", str(path)]).stdout

    def home(self) -> str:
        """The login node's home folder (where `~` in a remote path points)."""
        return self.run(["sh", "-c", 'printf %s "$HOME"']).stdout.strip()

    def put_dir(self, local: Path, remote: Path, *, timeout: float = 3600.0, replace: bool = False) -> None:
        """Copy the folder `local` to `remote` (which must not exist, unless `replace`) as a tar stream over the
        connection: written beside the final name and renamed, so the remote folder is complete or absent (with
        `replace`, the older one until the rename)."""
        part, dest = shlex.quote(str(remote.with_name(f".{remote.name}.partial"))), shlex.quote(str(remote))
        old = shlex.quote(str(remote.with_name(f".{remote.name}.old")))
        swap = (f"rm -rf {old}; if [ -e {dest} ]; then mv -T {dest} {old}; fi; mv -T {part} {dest}; rm -rf {old}"
                if replace else f"mv -T {part} {dest}")
        script = (f"set -e; mkdir -p {shlex.quote(str(remote.parent))}; rm -rf {part}; mkdir -m 700 {part}; "
                  f"tar -x -C {part} -f - || {{ rm -rf {part}; exit 1; }}; chmod 755 {part}; {swap}")
        # posix (pax) format: mtimes to the nanosecond, which the asset manifests record
        tar = subprocess.Popen(["tar", "-c", "--format=posix", "-C", str(local), "-f", "-", "."],
                               stdout=subprocess.PIPE)
        try:
            proc = subprocess.run([*self.ssh_argv(), shlex.join(["sh", "-c", script])], stdin=tar.stdout,
                                  capture_output=True, text=True, timeout=timeout)
        finally:
            if tar.stdout:
                tar.stdout.close()
            tar.wait()
        if proc.returncode == 255:
            raise self.login_error(proc.stderr)
        if proc.returncode != 0 or tar.returncode != 0:
            raise CommandError(f"copying {local} to {self.target.label}:{remote} failed: {proc.stderr.strip()}")

    def get_dir(self, remote: Path, local: Path, *, exclude: Sequence[str] = (), timeout: float = 120.0) -> None:
        """Copy the remote folder `remote` into `local` (made if needed) as a tar stream, without `exclude`
        (top-level names such as logs, checkpoints: status and report read only the small files)."""
        argv = ["tar", "-c", "-C", str(remote), *(f"--exclude=./{e}" for e in exclude), "-f", "-", "."]
        self.get_tar(argv, local, f"{self.target.label}:{remote}", timeout=timeout)

    def get_tar(self, argv: Sequence[str], local: Path, what: str, *, timeout: float = 120.0) -> None:
        """Run `argv` on the login node, which writes a tar stream, and unpack the stream into `local`."""
        local.mkdir(parents=True, exist_ok=True)
        ssh = subprocess.Popen([*self.ssh_argv(), shlex.join(argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            untar = subprocess.run(["tar", "-x", "-C", str(local), "-f", "-"], stdin=ssh.stdout,
                                   capture_output=True, text=True, timeout=timeout)
        finally:
            if ssh.stdout:
                ssh.stdout.close()
            err = ssh.stderr.read().decode(errors="replace") if ssh.stderr else ""
            ssh.wait()
        if ssh.returncode == 255:
            raise self.login_error(err)
        if ssh.returncode != 0 or untar.returncode != 0:
            raise CommandError(f"reading {what} failed: {err.strip() or untar.stderr.strip()}")

    def close(self) -> None:
        """Close the shared connection now (it closes by itself after IDLE_S seconds)."""
        subprocess.run([*self.ssh_argv()[:-2], "-O", "exit", "--", self.target.host], capture_output=True, timeout=30)


Host = LocalHost | SshHost


def login_path(text: str, home: str) -> str | None:
    """`text` as a path on the login node, `~` being its `home` there; None when it is not absolute then, or holds
    a $VARIABLE (which only a shell on the cluster expands)."""
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    return text if text.startswith("/") and "$" not in text else None


def ssh_host(target: Target | dict[str, object]) -> SshHost:
    """The login node of a target, or of a job record's or stage plan's `remote` (its dict form)."""
    return SshHost(target if isinstance(target, Target) else Target.from_dict(target))


def host_for(target: Target | dict[str, object] | None) -> Host:
    return LOCAL if target is None else ssh_host(target)


def _local_path(text: str) -> Path:
    from hpclaunch.core.paths import expand

    return expand(text, "remote")
