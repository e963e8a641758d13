"""A node's python before it surely holds its copy of the environment (issue 38, flat bytes at start): the health
check and the unpacking of a broadcast copy run the node's copy where it works, else the OS's python importing
hpclaunch's standard-library-only node modules from HPCLAUNCH_PKG_PATH (which `envstage pack --print-path` prints),
else the shared python (hpclaunch/submission/render.py node_python; the job script: templates/blocks/env_pack.sh.j2).
The picker runs here in bash as the job script renders it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.submission.render import MIN_PYTHON, OS_PYTHON, RUN, node_python

REPO = Path(__file__).resolve().parents[2]


def _os_python_fits() -> bool:
    if not os.access(OS_PYTHON, os.X_OK):
        return False
    version = f"import sys; sys.exit(sys.version_info < {MIN_PYTHON})"
    return subprocess.run([OS_PYTHON, "-I", "-c", version]).returncode == 0


OS_FITS = _os_python_fits()


def _pick(tmp_path: Path, *, copy: bool = True, os_python: bool = True, **env: str) -> tuple[list[str], dict[str, str]]:
    """Run the picker in bash on this machine as a node would: the command it chose (python and its options) and the
    environment it left."""
    script = node_python("shared-python", copy=copy, os_python=os_python) + (
        'printf "%s\\0" "${hpclaunch_run[@]}"; printf "\\n"; env -0')
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HPCLAUNCH_", "PYTHON"))}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                          env={**base, "HPCLAUNCH_NODE_SCRATCH": str(tmp_path / "scratch"), **env})
    chosen, _, rest = proc.stdout.partition("\n")
    return chosen.split("\0")[:-1], dict(item.split("=", 1) for item in rest.split("\0") if "=" in item)


def _copy(tmp_path: Path, key: str, python: str) -> Path:
    """SCRATCH/<host>/envs/KEY/bin/python, a link to `python` (what envstage's unpack leaves, as far as the picker
    looks)."""
    bin_dir = tmp_path / "scratch" / socket.gethostname().split(".")[0] / "envs" / key / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(python)
    return bin_dir / "python"


def test_a_node_that_holds_a_working_copy_runs_its_python(tmp_path):
    venv_python = tmp_path / "venv-python"  # this venv's python, which imports hpclaunch, as a copy's does
    venv_python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    venv_python.chmod(0o755)
    copy = _copy(tmp_path, "k1", str(venv_python))
    chosen, env = _pick(tmp_path, HPCLAUNCH_ENV_KEY="k1", HPCLAUNCH_PKG_PATH=str(REPO))
    assert chosen == [str(copy), "-m"] and env.get("PYTHONSAFEPATH") == "1"


@pytest.mark.skipif(not OS_FITS, reason=f"{OS_PYTHON} is missing or older than {MIN_PYTHON}")
def test_a_node_without_a_working_copy_runs_the_os_python_with_hpclaunch_on_its_path(tmp_path):
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    _copy(tmp_path, "k1", str(broken))  # a copy whose python fails is not used
    for env in ({"HPCLAUNCH_ENV_KEY": "k1"}, {"HPCLAUNCH_ENV_KEY": "other-key"}, {}):
        chosen, _ = _pick(tmp_path, HPCLAUNCH_PKG_PATH=str(REPO), **env)
        # isolated, writing no bytecode, hpclaunch's folder last on sys.path (after the standard library)
        assert chosen[:3] == [OS_PYTHON, "-I", "-B"] and chosen[-1] == str(REPO)


def test_without_the_folder_of_hpclaunch_or_the_os_python_it_is_the_shared_python(tmp_path):
    assert _pick(tmp_path, HPCLAUNCH_ENV_KEY="k1")[0] == ["shared-python", "-m"]  # the pack said nothing (failed)
    # the link check on devices imports torch with the check's python: the OS's is not offered
    assert _pick(tmp_path, os_python=False, HPCLAUNCH_ENV_KEY="k1", HPCLAUNCH_PKG_PATH=str(REPO))[0] == [
        "shared-python", "-m"]


@pytest.mark.skipif(not OS_FITS, reason=f"{OS_PYTHON} is missing or older than {MIN_PYTHON}")
def test_the_os_python_runs_the_health_check_and_imports_only_the_standard_library(tmp_path):
    """hpclaunch/__init__.py and every module the health check and the unpack import need nothing outside the
    standard library: the OS's python, with no site-packages of ours, runs them."""
    env = {"PATH": os.environ["PATH"], "HPCLAUNCH_RUN_DIR": str(tmp_path), "HPCLAUNCH_NNODES": "1",
           "HPCLAUNCH_RESTART": "0", "HPCLAUNCH_NODE_RANK": "0"}
    script = node_python("shared-python", copy=False, os_python=True) + RUN + (
        'hpclaunch.runtime.node.health check --no-allreduce --nodes 1 --scratch "$1"')
    proc = subprocess.run(["bash", "-c", script, "check", str(tmp_path)], capture_output=True, text=True,
                          env={**env, "HPCLAUNCH_PKG_PATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "health" / "node-0.restart-0.json").read_text())
    assert record["ok"] is True and record["python"] == OS_PYTHON
    outside = subprocess.run(
        [OS_PYTHON, "-S", "-c", "import sys; import hpclaunch.runtime.node.health, hpclaunch.runtime.node.envstage; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names "
         "and m.split('.')[0] != 'hpclaunch' and not m.startswith('_')))"],
        capture_output=True, text=True, env={"PYTHONPATH": str(REPO)}, check=True)
    assert outside.stdout.strip() == "[]"


@pytest.mark.skipif(not shutil.which("mksquashfs"), reason="squashfs-tools is not installed")
def test_pack_prints_the_key_then_the_folder_that_holds_hpclaunch(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HPCLAUNCH_NODE_LOCAL_PREFIXES": f"/usr:{sys.base_prefix}:{REPO}"}
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "hpclaunch.runtime.node.envstage", "pack", "--cache",
                           str(tmp_path / "envs"), "--print-path"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    key, folder = proc.stdout.splitlines()
    assert (tmp_path / "envs" / f"{key}.sqfs").is_file() and Path(folder) == REPO
