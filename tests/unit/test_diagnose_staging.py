"""`logs --diagnose` on node-local staging failures (python.stage / assets.stage node-local, docs/fast-start.md),
from what the real stager prints: each case runs hpclaunch.runtime.node.envstage / nodestage (or a rank's asset
copy) into a failure made for real (a source bigger than the filesystem's free space, a damaged SquashFS image,
squashfs-tools missing from PATH, a scratch path that is a file, a bare system python), puts its output where the
job writes it and asks `diagnose` for the node, the cause and what to do. With python.stage_fallback shared the
same failure is a warning and never the diagnosed cause. The whole job on the dev cluster (a node whose local
scratch is a tiny tmpfs): tests/integration/test_nodelocal_fail_slurm.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.logs.diagnose import diagnose
from hpclaunch.runtime.node.nodestage import node_name
from hpclaunch.schedulers.base import JobStatus

REPO = Path(__file__).resolve().parents[2]
SQUASHFS = shutil.which("mksquashfs") and shutil.which("unsquashfs")
HEAD = "hpclaunch: job 7 restart 0 on node1, head node1:21084\n"
FAILED = JobStatus("7", "FAILED", exit_code="1:0")


def _run(python: Path | str, module: str, *args: str, path: str | None = None) -> str:
    """The stager's stderr (it failed: exit 1)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"PATH": path} if path else {})}
    proc = subprocess.run([str(python), "-m", f"hpclaunch.runtime.node.{module}", *args], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def _job(root: Path, output: str, rank_logs: dict[int, str] | None = None) -> Path:
    """A run directory whose job output holds `output` (and rank logs, when the ranks started)."""
    logs = root / "run" / "logs"
    logs.mkdir(parents=True)
    (logs / "job.7.out").write_text(HEAD + output)
    for rank, text in (rank_logs or {}).items():
        (logs / f"rank-{rank}.restart-0.log").write_text(text)
    return root / "run"


def _said(d) -> str:  # noqa: ANN001 - Diagnosis
    return " ".join(filter(None, (d.title, d.hint, d.node, d.error)))


def _sparse_tree(root: Path) -> Path:
    """A folder whose one (sparse) file is bigger than the free space of the filesystem it is copied onto."""
    root.mkdir(parents=True)
    with open(root / "big.bin", "wb") as f:
        f.truncate(max(2 * shutil.disk_usage(root).free, 1 << 40))
    return root


@pytest.fixture
def packed(tmp_path) -> tuple[Path, str]:
    """A real tiny venv packed into a store's envs/ folder: (the folder, the key)."""
    if not SQUASHFS:
        pytest.skip("squashfs-tools (mksquashfs, unsquashfs) is not installed")
    root = tmp_path / "packed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    proc = subprocess.run([str(root / "venv" / "bin" / "python"), "-m", "hpclaunch.runtime.node.envstage", "pack",
                           "--cache", str(root / "envs")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    return root / "envs", proc.stdout.strip()


def test_not_enough_local_scratch_names_the_node_and_what_to_do(tmp_path):
    src = _sparse_tree(tmp_path / "src")
    out = _run(sys.executable, "nodestage", "tree", str(src), str(tmp_path / "scratch" / "node1" / "envs" / "k"), "k")
    assert "GiB free, the copy needs" in out
    d = diagnose(_job(tmp_path, out), "7", FAILED)
    assert (d.cause, d.node) == ("stage_no_space", node_name()), d
    assert d.title == f"not enough local scratch on {node_name()} for the node-local copy"
    for words in ("free space", "node_scratch", f"--exclude {node_name()}", "python.stage: shared",
                  "python.stage_fallback: shared"):
        assert words in d.hint, (words, d.hint)
    assert not (tmp_path / "scratch" / "node1" / "envs" / "k").exists()  # nothing half-written


def test_a_ranks_asset_copy_without_room_is_a_scratch_problem_not_a_missing_asset(tmp_path):
    """assets.stage node-local: the rank's AssetError (its traceback's last line in its log)."""
    store = tmp_path / "store"
    model = _sparse_tree(store / "models" / "org--big" / "main")
    code = ("import sys; from pathlib import Path; from hpclaunch.runtime.train.nodeassets import local_copy; "
            "local_copy(Path(sys.argv[1]), Path(sys.argv[2]))")
    proc = subprocess.run([sys.executable, "-c", code, str(model), str(store)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HPCLAUNCH_NODE_ASSETS": "1",
                               "HPCLAUNCH_NODE_SCRATCH": str(tmp_path / "scratch")})
    assert proc.returncode == 1 and "AssetError: copying" in proc.stderr, proc.stderr
    d = diagnose(_job(tmp_path, "", {0: "step 1 loss 3.2\n", 1: proc.stderr}), "7", FAILED)
    assert (d.cause, d.rank, d.node) == ("stage_no_space", 1, node_name()), d
    assert "assets.stage: shared" in d.hint


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_a_damaged_packed_environment_is_named_with_the_image_to_remove(tmp_path, packed):
    cache, key = packed
    image = cache / f"{key}.sqfs"
    data = bytearray(image.read_bytes())
    data[len(data) // 4:-200] = b"\xab" * (len(data) * 3 // 4 - 200)  # damaged in place: the same size
    image.write_bytes(bytes(data))
    out = _run(sys.executable, "envstage", "node", "--cache", str(cache), "--key", key, "--scratch",
               str(tmp_path / "scratch"))
    d = diagnose(_job(tmp_path, out), "7", FAILED)
    assert (d.cause, d.node) == ("stage_image_corrupt", node_name()), d
    assert str(image) in d.error and "remove the image" in d.hint
    assert not (tmp_path / "scratch" / node_name() / "envs" / key).exists()


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_a_packed_image_cut_short_is_packed_again(tmp_path, packed):
    """A stale store entry (its image gone or of another size than its record says) is packed again, not used."""
    cache, key = packed
    venv = Path(json.loads((cache / f"{key}.json").read_text())["prefix"])
    image = cache / f"{key}.sqfs"
    whole = image.stat().st_size
    image.write_bytes(image.read_bytes()[:1000])
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "hpclaunch.runtime.node.envstage", "pack", "--cache",
                           str(cache)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and proc.stdout.strip() == key, proc.stderr
    assert "packed as" in proc.stderr and image.stat().st_size == whole


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_squashfs_tools_missing_on_a_node(tmp_path, packed):
    envs, key = packed
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)  # python, but no unsquashfs on this PATH
    out = _run(bare / "python", "envstage", "node", "--cache", str(envs), "--key", key, "--scratch",
               str(tmp_path / "scratch"), path=str(bare))
    d = diagnose(_job(tmp_path, out), "7", FAILED)
    assert (d.cause, d.node) == ("stage_tool_missing", node_name()), d
    assert "apt install squashfs-tools" in d.hint and d.title.startswith(f"squashfs-tools are missing on {node_name()}")


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_a_copy_that_cannot_be_written_names_the_node(tmp_path, packed):
    envs, key = packed
    (tmp_path / "scratch").write_text("a file where the node's scratch folder should be")
    out = _run(sys.executable, "envstage", "node", "--cache", str(envs), "--key", key, "--scratch",
               str(tmp_path / "scratch"))
    d = diagnose(_job(tmp_path, out), "7", FAILED)
    assert (d.cause, d.node) == ("stage_copy_failed", node_name()), d
    assert "Not a directory" in d.error and "writable node-local folder" in d.hint


def test_packing_a_system_python_fails_with_the_reason(tmp_path):
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    out = _run(base, "envstage", "pack", "--cache", str(tmp_path / "envs"))
    d = diagnose(_job(tmp_path, out), "7", FAILED)
    assert d.cause == "stage_pack_failed", d
    assert "no venv or conda environment" in d.hint and "python.stage: shared" in d.hint


def test_with_the_fallback_a_staging_failure_is_a_warning_and_never_the_cause(tmp_path):
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    out = _run(base, "envstage", "pack", "--cache", str(tmp_path / "envs"), "--fallback")
    assert out.startswith("hpclaunch: warning: ") and "python.stage_fallback shared" in out
    later = "Traceback (most recent call last):\n  File \"train.py\", line 3\nValueError: boom\n"
    d = diagnose(_job(tmp_path, out, {0: later}), "7", FAILED)
    assert (d.cause, d.rank) == ("python_error", 0), d  # the rank's own error, not the staging it fell back from
    alone = diagnose(_job(tmp_path / "alone", out), "7", FAILED)
    assert not (alone.cause or "").startswith("stage_"), alone
