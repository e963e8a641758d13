"""Submitting over SSH (docs/remote.md), the parts that need no login node: the --remote syntax, the ssh command
line (host keys always checked, one shared connection, a private control folder), the profile's remote: keys, and
bad input through the real CLI (exit 2, one message, nothing written). The login itself is tested against the dev
cluster's sshd in tests/integration/test_remote_ssh.py."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpclaunch.core.remote import CONTROL_DIR_MAX, SshHost, Target, control_dir, parse_target
from hpclaunch.errors import CommandError, ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "want"), [
    ("alice@login.cluster.org", Target("login.cluster.org", "alice", 22)),
    ("login1", Target("login1", None, 22)),
    ("bob@10.0.0.7:2222", Target("10.0.0.7", "bob", 2222)),
])
def test_remote_addresses_parse(text, want):
    assert parse_target(text) == want


@pytest.mark.parametrize("text", ["", "alice@", "@host", "a b@host", "host:0", "host:70000", "-oProxyCommand=x",
                                  "alice@host:port", "host;rm -rf /", "user@host:22:33"])
def test_bad_remote_addresses_are_refused_with_the_form_to_use(text):
    with pytest.raises(ConfigError) as err:
        parse_target(text)
    assert "--remote" in str(err.value) and "user@host" in str(err.value)


@pytest.fixture
def runtime_dir(monkeypatch):
    """A short $XDG_RUNTIME_DIR of this test (a socket's path is short)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    yield folder
    shutil.rmtree(folder)


def test_ssh_checks_host_keys_and_shares_one_connection(tmp_path, runtime_dir):
    key = tmp_path / "id"
    key.write_text("not read here\n")
    argv = SshHost(Target("login", "alice", 2222, str(key), str(tmp_path / "kh"))).command(["squeue", "--me"])
    line = " ".join(argv)
    assert "StrictHostKeyChecking=yes" in line and "BatchMode=yes" in line
    assert "StrictHostKeyChecking=no" not in line and "UserKnownHostsFile=/dev/null" not in line
    assert f"UserKnownHostsFile={tmp_path / 'kh'}" in line
    assert "ControlMaster=auto" in line and f"ControlPath={runtime_dir}/hpclaunch-ssh/%C" in line
    assert "ControlPersist=" in line
    assert argv[-3:] == ["--", "login", "squeue --me"]  # the remote words quoted for its shell, after --
    assert (runtime_dir / "hpclaunch-ssh").stat().st_mode & 0o777 == 0o700
    assert "not read here" not in line  # the key is a path ssh reads, never its content


def test_a_runtime_folder_too_long_for_a_socket_is_passed_over(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 80)))
    assert len(str(control_dir())) <= CONTROL_DIR_MAX and control_dir().stat().st_mode & 0o777 == 0o700


def test_a_control_folder_others_may_enter_is_refused(runtime_dir):
    (runtime_dir / "hpclaunch-ssh").mkdir(mode=0o755)
    os.chmod(runtime_dir / "hpclaunch-ssh", 0o755)
    with pytest.raises(CommandError, match="not a private folder"):
        control_dir()


def test_a_missing_identity_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"remote.identity: the identity file .*/nope does not exist"):
        SshHost(Target("login", identity=str(tmp_path / "nope"))).ssh_argv()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _submit(tmp_path: Path, *args: str, profile: str = "dev-slurm-ssh") -> subprocess.CompletedProcess:
    env = {**os.environ, "HPCLAUNCH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO),
           "XDG_RUNTIME_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "submit", "gpt2", "--profile", profile,
                           "--preset", "tiny", *args], capture_output=True, text=True, env=env, timeout=120)


def _nothing_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert not list((home / "registry").glob("*.json")) if (home / "registry").exists() else True
    assert not list((home / "staging").iterdir()) if (home / "staging").exists() else True


@pytest.mark.parametrize(("remote", "said"), [
    ("not an address", "'not an address' is not a login address"),
    ("root@127.0.0.1:99999", "port 99999 is not between 1 and 65535"),
])
def test_a_bad_remote_flag_exits_2_before_anything_is_written(tmp_path, remote, said):
    proc = _submit(tmp_path, "--remote", remote)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    _nothing_written(tmp_path)


def test_an_unreachable_login_node_exits_2_with_nothing_written(tmp_path):
    proc = _submit(tmp_path, "--remote", f"root@127.0.0.1:{_free_port()}")
    assert proc.returncode == 2, proc.stderr
    assert "cannot log in to root@127.0.0.1:" in proc.stderr and "Connection refused" in proc.stderr
    assert "Traceback" not in proc.stderr
    _nothing_written(tmp_path)


def test_a_remote_profile_with_a_relative_run_root_is_refused(tmp_path):
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm-ssh.yaml").read_text())
    data["run_root"] = "runs"
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(data))
    env = {**os.environ, "HPCLAUNCH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "submit", "gpt2", "--profile", str(profile),
                           "--preset", "tiny", "--dry-run"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "run_root: 'runs': the run root of a profile with remote:" in proc.stderr


def test_a_profile_remote_key_is_checked(tmp_path):
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm-ssh.yaml").read_text())
    data["remote"]["prot"] = 22
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(data))
    env = {**os.environ, "HPCLAUNCH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "profiles", "show", str(profile)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "remote.prot" in proc.stderr, proc.stderr


def test_a_dry_run_renders_for_the_cluster_and_asks_no_login_node(tmp_path):
    proc = _submit(tmp_path, "--remote", f"root@127.0.0.1:{_free_port()}", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    staged = proc.stderr.rsplit("run directory ", 1)[1].strip()
    assert staged.startswith(str(tmp_path / "home" / "staging"))
    assert "/tmp/hpclaunch-ssh-runs/" in proc.stdout  # the script names the run directory on the cluster


def test_a_job_record_keeps_its_login_node_and_no_key(tmp_path, monkeypatch):
    from hpclaunch.state import registry

    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path))
    where = Target("127.0.0.1", "root", 2222, "/keys/id_ed25519", "/keys/known_hosts")
    common = dict(scheduler="slurm", profile="dev-slurm-ssh", recipe="gpt2", preset="tiny", launcher="torchrun",
                  layout="2n1g", name="gpt2", run_dir="/scratch/runs/x", submitted_at="2026-11-25T07:00:00+0000")
    registry.add(registry.JobRecord(job_id="7", remote=where.to_dict(), **common))
    registry.add(registry.JobRecord(job_id="8", **common))
    assert Target.from_dict(registry.get("7").remote) == where
    assert "remote" not in (tmp_path / "registry" / "8.json").read_text()  # older versions read it as before
    assert registry.get("8").remote is None


@pytest.mark.parametrize(("root", "want"), [(None, "/home/alice/.hpclaunch/runs"), ("~/runs", "/home/alice/runs"),
                                            ("/scratch/alice", "/scratch/alice")])
def test_the_run_root_is_the_login_nodes(root, want):
    from hpclaunch.config.base import replace
    from hpclaunch.config.loader import load_profile
    from hpclaunch.submission.overssh import remote_run_dir

    profile = replace(load_profile("dev-slurm-ssh"), run_root=root)

    class Spec:
        name = "gpt2"

    Spec.profile = profile
    assert str(remote_run_dir(Spec, "/home/alice").parent) == want  # type: ignore[arg-type]


def test_the_streamed_job_output_is_split_into_rank_lines_and_restarts():
    import queue
    import time

    from hpclaunch.logs.follow import Restart
    from hpclaunch.logs.read import Line
    from hpclaunch.logs.remote import _drain

    lines: queue.Queue[bytes | None] = queue.Queue()
    for raw in (b"hpclaunch: job 7 restart 0 on node1,node2, head node1:29500", b"[rank0]: step 1 loss 3.2",
                b"[rank1]: step 1 loss 3.3", b"hpclaunch: job 7 restart 1 on node1,node3, head node1:29500",
                b"[rank1]: resumed from step-1", None):
        lines.put(raw)
    state = {"restart": 0}
    events = list(_drain(lines, time.monotonic() + 1, state, None, None))
    assert events == [Line(None, 0, "hpclaunch: job 7 restart 0 on node1,node2, head node1:29500"),
                      Line(0, 0, "step 1 loss 3.2"), Line(1, 0, "step 1 loss 3.3"), Restart(1),
                      Line(None, 1, "hpclaunch: job 7 restart 1 on node1,node3, head node1:29500"),
                      Line(1, 1, "resumed from step-1")]
    for raw in (b"[rank0]: step 2 loss 3.1", b"[rank1]: step 2 loss 3.0", b"[rank1]: saved", None):
        lines.put(raw)
    only = list(_drain(lines, time.monotonic() + 1, state, 1, re.compile(b"loss")))
    assert only == [Line(1, 1, "step 2 loss 3.0")]


class _ShellHost:
    """Runs the login node's side of `get_tar` in this machine's shell (the same script, the same tar stream)."""

    class target:  # noqa: N801 - as SshHost.target
        label = "here"

    def get_tar(self, argv, local: Path, what: str, *, timeout: float = 120.0) -> None:
        local.mkdir(parents=True, exist_ok=True)
        tar = subprocess.run(list(argv), capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(local), "-f", "-"], input=tar.stdout, check=True)


def test_diagnose_over_ssh_reads_only_the_ends_of_the_logs_and_names_the_login_nodes_paths(tmp_path, monkeypatch):
    from hpclaunch.logs.diagnose import TAIL_BYTES, diagnose
    from hpclaunch.logs.remotediagnose import diagnose_remote, log_ends

    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "login" / "run"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "checkpoints" / "step-00000040").mkdir(parents=True)
    (run_dir / "logs" / "rank-0.restart-0.log").write_text("step 1 loss 2.0\n" * 20000)  # 320 KB
    (run_dir / "logs" / "rank-1.restart-0.log").write_text("x" * 200_000 + "\nValueError: bad batch on rank 1\n")
    (run_dir / "logs" / "job.7.out").write_text("hpclaunch: job 7 restart 0 on node1\n")
    os.utime(run_dir / "logs" / "rank-1.restart-0.log", (1_000_000, 1_000_000))
    ends = log_ends(_ShellHost(), run_dir)  # type: ignore[arg-type]
    copied = ends / "logs" / "rank-1.restart-0.log"
    assert copied.stat().st_size == TAIL_BYTES and copied.stat().st_mtime == 1_000_000
    assert (ends / "logs" / "job.7.out").read_text() == "hpclaunch: job 7 restart 0 on node1\n"
    assert (ends / "checkpoints" / "step-00000040").is_dir()
    d = diagnose_remote(_ShellHost(), run_dir, "7", None)  # type: ignore[arg-type]
    here = diagnose(run_dir, "7", None)
    assert (d.cause, d.rank, d.error) == (here.cause, here.rank, here.error) == ("python_error", 1,
                                                                                 "ValueError: bad batch on rank 1")
    assert d.file == str(run_dir / "logs" / "rank-1.restart-0.log")
    assert not (tmp_path / "home" / "remote" / "run.diagnose").exists()


def test_resume_from_scratch_over_ssh_is_refused_before_logging_in(tmp_path, monkeypatch):
    from hpclaunch.state import registry

    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path))
    where = Target("login.invalid", "alice", 22)  # never reached: the refusal comes first
    registry.add(registry.JobRecord("7", "slurm", "dev-slurm-ssh", "gpt2", "tiny", "torchrun", "1n1g", "gpt2",
                                    "/scratch/runs/x", "2026-11-25T07:00:00+0000", remote=where.to_dict()))
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "resume", "7", "--from-scratch"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HPCLAUNCH_HOME": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "submitted over SSH" in proc.stderr and "--from-scratch" in proc.stderr and "Traceback" not in proc.stderr
    assert "login.invalid" not in proc.stderr  # no login was tried
