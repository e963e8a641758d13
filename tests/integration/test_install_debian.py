"""The README's first command, verbatim, as a new user on Debian 12 runs it: `python3` is Debian's own (which
refuses pip outside a virtual environment, PEP 668), in a fresh copy of the checkout. It must make the project's
venv, install into it and run GPT-2 tiny on the local profile to COMPLETED. ~2 min (pip's cache is warm)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = Path("/usr/bin/python3")

pytestmark = pytest.mark.slow


def readme_commands() -> list[str]:
    """The indented command lines of README.md before its first section: set-up, then tests."""
    head = (REPO / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    return [line.strip() for line in head.splitlines() if line.startswith("    ") and line.strip()]


def checkout_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_the_readme_setup_runs_with_debians_own_python(tmp_path: Path) -> None:
    """Over 30 s: a new venv with the whole stack (the torch wheel alone is ~200 MB to unpack), then the README's
    job."""
    assert DEBIAN_PYTHON.is_file(), "this test needs Debian's /usr/bin/python3"
    managed = subprocess.run([str(DEBIAN_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert (Path(managed) / "EXTERNALLY-MANAGED").is_file(), "expected Debian's externally managed python3"
    setup = readme_commands()[0]
    assert setup.startswith("bash scripts/install-deps.sh") and "hpclaunch submit" in setup, setup
    tree = checkout_copy(tmp_path / "hpclaunch")
    # a user's shell: Debian's python3 first on PATH, no venv active, a home of their own
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "PYENV", "HPCLAUNCH"))}
    home = tmp_path / "home"
    home.mkdir()
    env.update(PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME=str(home),
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")))
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    proc = subprocess.run(["bash", "-c", setup], cwd=tree, env=env, capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "externally-managed-environment" not in out
    venv_python = tree / ".venv" / "bin" / "python"
    base = subprocess.run([str(venv_python), "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert base == "/usr", base  # made from Debian's python3
    assert re.search(r"job local-\d+ COMPLETED", out), out[-3000:]
    assert "use it with: source" in out  # install-deps says how to use the environment afterwards


def login_node_install() -> str:
    """The README's login-node install line (an indented command line), as pasted."""
    lines = [line.strip() for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("    python3 -m venv ~/hpclaunch-env")]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_login_node_install_runs_as_pasted(tmp_path: Path) -> None:
    """README's (and the quickstart's) `python3 -m venv ~/hpclaunch-env && ~/hpclaunch-env/bin/pip install .`, in
    the checkout's folder with Debian's python3, as pasted: the light core installs (no torch) and its hpclaunch
    runs. ~30 s (pip's cache is warm)."""
    command = login_node_install()
    quickstart = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert any(line.split("#")[0].strip() == command for line in quickstart.splitlines()), command
    tree = checkout_copy(tmp_path / "hpclaunch")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "PYENV", "HPCLAUNCH"))}
    env.update(PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME=str(home),
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")))
    proc = subprocess.run(["bash", "-c", command], cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    venv = home / "hpclaunch-env"
    listed = subprocess.run([str(venv / "bin" / "hpclaunch"), "profiles", "list"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and "guangzhou-a800" in listed.stdout, listed.stdout + listed.stderr
    torch = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, text=True)
    assert torch.returncode != 0 and "No module named 'torch'" in torch.stderr  # the light core: no torch
