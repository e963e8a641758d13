"""The wheel ships templates/, recipes/ and cluster_profiles/ as hpclaunch/_bundled/, and a
non-editable install finds them (no source tree around). Offline: no build isolation, no index."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREE = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "LICENSE",
    "hpclaunch",
    "templates",
    "recipes",
    "cluster_profiles",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build from a copy of the tree, so the working tree gets no build/ folder."""
    src = tmp_path_factory.mktemp("src")
    for name in TREE:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(
                path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            )
        elif path.is_file():
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (found,) = out.glob("hpclaunch-*.whl")
    return found


def test_wheel_holds_the_bundled_folders(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"hpclaunch/_bundled/cluster_profiles/{p.name}" for p in (REPO / "cluster_profiles").glob("*.yaml")
    }
    expected |= {
        f"hpclaunch/_bundled/templates/{p.relative_to(REPO / 'templates')}"
        for p in (REPO / "templates").rglob("*.j2")
    }
    expected |= {
        f"hpclaunch/_bundled/recipes/{p.relative_to(REPO / 'recipes')}"
        for p in (REPO / "recipes").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert "hpclaunch/_bundled/templates/job.sbatch.j2" in expected
    assert "hpclaunch/_bundled/recipes/gpt2/recipe.yaml" in expected
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("tests/")]


def test_non_editable_install_finds_the_bundled_files(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    # the core dependencies (click, jinja2, msgspec, ...) from the environment running the tests, put on the new
    # venv's path by a .pth line: its .pth files (the editable install of this checkout) are not processed there,
    # so `import hpclaunch` can only find the wheel installed below
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import sysconfig

    Path(site, "test-runner-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    work = tmp_path / "elsewhere"  # not the repository: nothing to find by accident
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("HPCLAUNCH_PATH", "PYTHONPATH")}
    env.update(HPCLAUNCH_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))

    where = subprocess.run(
        [
            str(py),
            "-c",
            "import hpclaunch, hpclaunch.core.paths as p; print(hpclaunch.__file__); print(p.bundled_root())",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0].startswith(str(venv)), f"imported {where[0]}, not the installed wheel"
    assert where[1] == str(Path(where[0]).parent / "_bundled")

    exe = str(venv / "bin" / "hpclaunch")
    listed = subprocess.run([exe, "profiles", "list"], cwd=work, env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    for name in ("guangzhou-a800", "cngrid12-v100", "musa-s4000", "ascend-910", "dev-slurm", "local"):
        assert name in listed.stdout
    assert "_bundled/cluster_profiles" in listed.stdout

    recipes = subprocess.run([exe, "recipes", "list"], cwd=work, env=env, capture_output=True, text=True)
    assert recipes.returncode == 0 and "gpt2" in recipes.stdout and "bert_large" in recipes.stdout

    dry = subprocess.run(
        [exe, "submit", "gpt2", "--profile", "guangzhou-a800", "--layout", "2n8g", "--dry-run"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("#!/bin/bash\n# Generated by hpclaunch")
    assert "--ranks=2:8 -- " in dry.stdout  # launch.agent auto: each node's supervisor starts its 8 ranks
