"""Node-local copies (hpclaunch/runtime/node/nodestage.py, envstage.py, elfpaths.py): a real venv packed with
mksquashfs, unpacked with unsquashfs somewhere else, relocated, and run from there after the original is gone."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hpclaunch.runtime.node import elfpaths, nodestage
from hpclaunch.runtime.node.nodestage import MARKER, StageError, copy_tree, stage

REPO = Path(__file__).resolve().parents[2]
SQUASHFS = shutil.which("mksquashfs") and shutil.which("unsquashfs")


def _tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.bin").write_bytes(b"\0" * 1000)
    return root


def test_stage_copies_once_then_is_warm_and_recopies_a_corrupt_copy(tmp_path):
    src, dest = _tree(tmp_path / "src"), tmp_path / "node" / "art"
    assert stage(dest, "k1", copy_tree(src)) == "copied"
    assert (dest / "sub" / "b.bin").read_bytes() == b"\0" * 1000
    assert stage(dest, "k1", copy_tree(src)) == "warm"
    (dest / "sub" / "b.bin").write_bytes(b"short")  # a corrupt copy: another size
    assert stage(dest, "k1", copy_tree(src)) == "recopied"
    assert (dest / "sub" / "b.bin").stat().st_size == 1000
    (dest / "a.txt").unlink()  # a file gone
    assert stage(dest, "k1", copy_tree(src)) == "recopied"
    assert stage(dest, "k2", copy_tree(src)) == "recopied"  # another key at the same place
    assert json.loads((dest / MARKER).read_text())["key"] == "k2"


def test_a_copy_that_dies_half_way_leaves_nothing_under_the_name(tmp_path):
    dest = tmp_path / "node" / "art"

    def dies(tmp: Path) -> None:
        (tmp / "half").write_text("x")
        raise OSError("disk gone")

    with pytest.raises(StageError, match="node .*: copying k1 to .*disk gone"):
        stage(dest, "k1", dies)
    assert not dest.exists()
    assert [p.name for p in dest.parent.iterdir()] == [".art.lock"]  # no temporary folder left either
    assert stage(dest, "k1", copy_tree(_tree(tmp_path / "src"))) == "copied"


def test_not_enough_space_is_refused_before_copying(tmp_path):
    with pytest.raises(StageError, match="GiB free, the copy needs"):
        stage(tmp_path / "art", "k", copy_tree(_tree(tmp_path / "src")), need_bytes=1 << 60)
    assert not (tmp_path / "art").exists()


def test_concurrent_stagers_on_one_node_copy_once(tmp_path):
    src, dest, results = _tree(tmp_path / "src"), tmp_path / "node" / "art", []
    threads = [threading.Thread(target=lambda: results.append(stage(dest, "k", copy_tree(src)))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["copied", "warm", "warm", "warm"]


def test_the_module_stages_a_file_for_one_task_per_node(tmp_path):
    f = tmp_path / "image.sqfs"
    f.write_bytes(b"img" * 100)
    cmd = [sys.executable, "-m", "hpclaunch.runtime.node.nodestage", "file", str(f), str(tmp_path / "n" / "h1"), "h1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout)
    again = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout)
    assert (first["result"], again["result"], first["node"]) == ("copied", "warm", nodestage.node_name())
    assert (tmp_path / "n" / "h1" / "image.sqfs").read_bytes() == b"img" * 100


def _staged_by_a_process_gone(src: Path, dest: Path, days_ago: float) -> Path:
    """`dest` staged by another process that has exited (`python -m ...nodestage`, which removes nothing here),
    last used `days_ago`."""
    cmd = [sys.executable, "-m", "hpclaunch.runtime.node.nodestage", "tree", str(src), str(dest), dest.name]
    env = {**os.environ, "PYTHONPATH": str(REPO), nodestage.ENV_KEEP_DAYS: "1000"}
    subprocess.run(cmd, capture_output=True, env=env, check=True)
    return _last_used(dest, days_ago)


def _last_used(dest: Path, days_ago: float) -> Path:
    when = time.time() - days_ago * 86400
    os.utime(dest / MARKER, (when, when))
    return dest


def test_copies_of_other_keys_unused_for_days_are_removed_when_a_node_stages_and_said_so(tmp_path, capsys,
                                                                                         monkeypatch):
    src, envs, outside = _tree(tmp_path / "src"), tmp_path / "scratch" / "node1" / "envs", tmp_path / "outside"
    old = _staged_by_a_process_gone(src, envs / "old", days_ago=5)
    recent = _staged_by_a_process_gone(src, envs / "recent", days_ago=2)
    far = _staged_by_a_process_gone(src, outside / "far", days_ago=30)  # another folder: never looked at
    (envs / "link").symlink_to(far)  # a link to an old copy elsewhere: neither it nor its target removed
    (envs / "yours").mkdir()  # no marker: not a copy the stager made
    (envs / "yours" / "notes.txt").write_text("keep")
    os.utime(envs / "yours", (time.time() - 99 * 86400,) * 2)
    monkeypatch.setenv(nodestage.ENV_KEEP_DAYS, "3")
    assert stage(envs / "new", "new", copy_tree(src)) == "copied"
    assert sorted(p.name for p in envs.iterdir() if not p.name.startswith(".")) == ["link", "new", "recent", "yours"]
    assert not old.exists() and recent.is_dir() and far.is_dir() and (envs / "yours" / "notes.txt").is_file()
    assert not list(envs.glob(".old.tmp-*"))  # removed whole, nothing left half-way
    err = capsys.readouterr().err
    assert err == (f"hpclaunch: node {nodestage.node_name()}: removed 1 node-local copies unused for more than 3 days "
                   f"from {envs}: old\n")
    _last_used(recent, days_ago=4)
    assert stage(envs / "new", "new", copy_tree(src)) == "warm"  # a warm stage cleans too
    assert not recent.exists() and (envs / "new" / MARKER).stat().st_mtime > time.time() - 60  # its use: now
    monkeypatch.setenv(nodestage.ENV_KEEP_DAYS, "100")  # the profile's node_scratch_keep_days
    _staged_by_a_process_gone(src, envs / "month", days_ago=30)
    assert stage(envs / "new", "new", copy_tree(src)) == "warm" and (envs / "month").is_dir()


_HOLDER = """
import fcntl, os, sys
from pathlib import Path
from hpclaunch.runtime.node.nodestage import copy_tree, hold, stage
how, src, dest = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if how == "uses":  # a job that staged the copy and runs from it
    stage(dest, dest.name, copy_tree(src))
elif how == "runs":  # a rank's wrapper running from a copy a stager task (gone) made: rank_exec holds sys.prefix
    assert hold(dest) and not hold(dest.parent)
else:  # a stager that holds the copy's lock (checking or replacing it)
    fd = os.open(dest.parent / f".{dest.name}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("how", ["uses", "stages", "runs"])
def test_an_old_copy_another_process_uses_or_stages_is_not_removed(tmp_path, capsys, monkeypatch, how):
    src, envs = _tree(tmp_path / "src"), tmp_path / "scratch" / "node1" / "envs"
    busy = _staged_by_a_process_gone(src, envs / "busy", days_ago=10)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, how, str(src), str(busy)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        _last_used(busy, days_ago=10)  # however long ago its last stage was
        assert stage(envs / "new", "new", copy_tree(src)) == "copied"
        assert nodestage.intact(busy, "busy") and "removed" not in capsys.readouterr().err
    finally:
        holder.communicate("", timeout=60)  # the other process ends: the copy is free
    assert stage(envs / "new", "new", copy_tree(src)) == "warm"
    assert not busy.exists() and capsys.readouterr().err.endswith(f"from {envs}: busy\n")


def _venv(root: Path) -> Path:
    """A real venv with what a relocation must fix: a console script, a .pth entry under the prefix, an absolute
    symlink into it and (with a C compiler) an extension whose RUNPATH names a library folder in it."""
    venv = root / "shared" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / "bin" / "mytool").write_text(f"#!{venv}/bin/python\nimport sys, extra_mod\n"
                                         "print(sys.prefix, extra_mod.WHERE)\n")
    (venv / "bin" / "mytool").chmod(0o755)
    (venv / "extra").mkdir()
    (venv / "extra" / "extra_mod.py").write_text("WHERE = __file__\n")
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "extra.pth").write_text(f"{venv}/extra\n")
    (venv / "data-link").symlink_to(venv / "extra" / "extra_mod.py")
    return venv


def _extension(venv: Path, tmp: Path) -> Path | None:
    if shutil.which("gcc") is None:
        return None
    libs, pkg = venv / "lib" / "mylibs", next((venv / "lib").glob("python3*/site-packages")) / "pkg"
    libs.mkdir()
    pkg.mkdir()
    (tmp / "dep.c").write_text("int dep(void) { return 42; }\n")
    (tmp / "ext.c").write_text("int dep(void); int ext(void) { return dep(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(libs / "libdep.so"), str(tmp / "dep.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "_ext.so"), str(tmp / "ext.c"), f"-L{libs}", "-ldep",
                    f"-Wl,-rpath,{libs}"], check=True)
    return pkg / "_ext.so"


def _envstage(python: Path, *args: str) -> subprocess.CompletedProcess:
    # the base interpreter and the checkout taken as node-local: not carried (~10 s; test_envcarry.py carries them)
    local = {"HPCLAUNCH_NODE_LOCAL_PREFIXES": f"/usr:{sys.base_prefix}:{REPO}"}
    return subprocess.run([str(python), "-m", "hpclaunch.runtime.node.envstage", *args], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO), **local})


@pytest.mark.skipif(not SQUASHFS, reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_a_packed_venv_runs_from_its_node_copy_after_the_shared_one_is_gone(tmp_path):
    venv = _venv(tmp_path)
    ext = _extension(venv, tmp_path)
    cache, scratch = tmp_path / "store" / "envs", tmp_path / "scratch"
    packed = _envstage(venv / "bin" / "python", "pack", "--cache", str(cache))
    assert packed.returncode == 0, packed.stderr
    key = packed.stdout.strip()
    assert (cache / f"{key}.sqfs").is_file() and "packed as" in packed.stderr
    again = _envstage(venv / "bin" / "python", "pack", "--cache", str(cache))
    assert again.stdout.strip() == key and "warm as" in again.stderr  # same content hash: not packed twice
    shutil.move(str(venv.parent), str(tmp_path / "gone"))  # the shared path no longer exists
    node = _envstage(Path(sys.executable), "node", "--cache", str(cache), "--key", key, "--scratch", str(scratch))
    assert node.returncode == 0, node.stderr
    assert json.loads(node.stdout)["result"] == "copied"
    copy = scratch / nodestage.node_name() / "envs" / key
    out = subprocess.run([str(copy / "bin" / "mytool")], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    prefix, where = out.stdout.split()
    assert Path(prefix) == copy and Path(where) == copy / "extra" / "extra_mod.py"  # shebang and .pth relocated
    assert f"VIRTUAL_ENV={copy}" in (copy / "bin" / "activate").read_text().replace("'", "").replace('"', "")
    assert os.readlink(copy / "data-link") == str(copy / "extra" / "extra_mod.py")
    if ext is not None:
        ext_copy = copy / ext.relative_to(tmp_path / "shared" / "venv")
        assert [v for _, v in elfpaths.rpaths(ext_copy)] == ["$ORIGIN/../../../mylibs"]
        assert ctypes.CDLL(str(ext_copy)).ext() == 42  # loads its library from the copy: the original is gone
    warm = _envstage(Path(sys.executable), "node", "--cache", str(cache), "--key", key, "--scratch", str(scratch))
    assert json.loads(warm.stdout)["result"] == "warm"
    (copy / "bin" / "mytool").write_text("corrupt")
    fixed = _envstage(Path(sys.executable), "node", "--cache", str(cache), "--key", key, "--scratch", str(scratch))
    assert json.loads(fixed.stdout)["result"] == "recopied"
    assert (copy / "bin" / "mytool").read_text().startswith(f"#!{copy}/bin/python")


def test_the_key_changes_when_a_package_changes(tmp_path):
    from hpclaunch.runtime.node.envstage import env_key

    root = _tree(tmp_path / "env")
    first = env_key(root)
    (root / "sub" / "__pycache__").mkdir()
    (root / "sub" / "__pycache__" / "x.pyc").write_text("compiled")
    assert env_key(root) == first  # bytecode written by a run is not a change of the environment
    (root / "sub" / "new.py").write_text("installed")
    assert env_key(root) != first


def test_a_system_python_is_refused_with_the_reason(tmp_path):
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    proc = _envstage(base, "pack", "--cache", str(tmp_path))
    assert proc.returncode == 1
    assert "packs a venv or conda environment" in proc.stderr and "Traceback" not in proc.stderr


def _asset(store: Path) -> Path:
    import hashlib

    folder = store / "models" / "org--tiny" / "main"
    (folder / "sub").mkdir(parents=True)
    files = {"config.json": b'{"n_layer": 2}', "sub/weights.bin": b"\1" * 4096}
    for rel, data in files.items():
        (folder / rel).write_bytes(data)
    entries = [{"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
               for rel, data in files.items()]
    (folder / "hpclaunch-manifest.json").write_text(json.dumps({"repo": "org/tiny", "files": entries}))
    return folder


def test_assets_are_read_from_a_node_copy_checked_against_the_manifest(tmp_path, monkeypatch):
    from hpclaunch.errors import AssetError
    from hpclaunch.runtime.train import nodeassets

    store, scratch = tmp_path / "store", tmp_path / "scratch"
    folder = _asset(store)
    assert nodeassets.local_copy(folder, store) == folder  # assets.stage shared: the store itself
    monkeypatch.setenv("HPCLAUNCH_NODE_ASSETS", "1")
    monkeypatch.setenv("HPCLAUNCH_NODE_SCRATCH", str(scratch))
    copy = nodeassets.local_copy(folder, store)
    assert copy == scratch / nodestage.node_name() / "assets" / "models" / "org--tiny" / "main"
    assert (copy / "sub" / "weights.bin").read_bytes() == b"\1" * 4096
    (copy / "sub" / "weights.bin").write_bytes(b"bad")  # a corrupt node copy: copied again from the store
    assert (nodeassets.local_copy(folder, store) / "sub" / "weights.bin").read_bytes() == b"\1" * 4096
    (folder / "sub" / "weights.bin").write_bytes(b"\2" * 4096)  # the store's file no longer matches its manifest
    shutil.rmtree(copy)
    with pytest.raises(AssetError, match="sha256 .* is not the manifest's"):
        nodeassets.local_copy(folder, store)
    assert not copy.exists()  # nothing half-copied is left to read


def test_the_checkpoint_a_job_resumes_from_is_copied_once_per_node(tmp_path, monkeypatch):
    from hpclaunch.runtime.train import nodeassets

    ckpt = _tree(tmp_path / "run" / "checkpoints" / "step-20")
    monkeypatch.setenv("HPCLAUNCH_NODE_ASSETS", "1")
    monkeypatch.setenv("HPCLAUNCH_NODE_SCRATCH", str(tmp_path / "scratch"))
    copy = nodeassets.local_checkpoint(ckpt)
    assert copy.name.endswith("-step-20") and (copy / "a.txt").read_text() == "alpha"
    (ckpt / "a.txt").write_text("omega")  # same size: the node's copy is warm, not copied again
    assert nodeassets.local_checkpoint(ckpt) == copy and (copy / "a.txt").read_text() == "alpha"


def test_the_dry_run_shows_the_staging_step_per_job_and_per_profile(hpclaunch, hpc_home, tmp_path):
    import yaml

    plain = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--nodes", "2", "--dry-run")
    assert plain.exit_code == 0 and "envstage" not in plain.output and "env_staged" not in plain.output
    staged = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--nodes", "2", "--dry-run",
                       "--set", "python.stage=node-local")
    assert staged.exit_code == 0, staged.output
    out = staged.output
    assert 'export HPCLAUNCH_NODE_SCRATCH="${TMPDIR:-/tmp}/hpclaunch-${USER:-user}"' in out
    assert "export HPCLAUNCH_NODE_SCRATCH_KEEP_DAYS=3\n" in out
    pack = ('hpclaunch_packed=$(python -m hpclaunch.runtime.node.envstage pack '
            '--cache "${HOME}/.hpclaunch/assets/envs" --print-path)')
    assert pack in out
    # the key (and the folder of hpclaunch) before the health check, which runs with the node's copy where it can
    assert out.index(pack) < out.index("hpclaunch_stamp env_packed") < out.index("runtime.node.health check")
    assert "--ntasks=2 --ntasks-per-node=1" in out.split("hpclaunch.runtime.node.envstage node")[0].rsplit("srun", 1)[1]
    assert out.index("hpclaunch_stamp health_checked") < out.index("hpclaunch_stamp env_staged") \
        < out.index("hpclaunch_stamp launched")
    assert 'export VIRTUAL_ENV="$hpclaunch_env" PATH="$hpclaunch_env/bin:$PATH"' in out
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["assets"]["stage"] = "node-local"
    data["node_scratch"] = "/local/scratch"
    data["node_scratch_keep_days"] = 0.5
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    assets = hpclaunch("submit", "allreduce", "--profile", str(tmp_path / "p.yaml"), "--dry-run")
    assert assets.exit_code == 0, assets.output
    assert "export HPCLAUNCH_NODE_SCRATCH=/local/scratch" in assets.output
    assert "export HPCLAUNCH_NODE_SCRATCH_KEEP_DAYS=0.5\n" in assets.output
    assert "export HPCLAUNCH_NODE_ASSETS=1; " in assets.output and "envstage" not in assets.output


def test_the_fallback_to_the_shared_environment_per_profile_and_per_job(hpclaunch, hpc_home, tmp_path):
    """python.stage_fallback: shared in the profile or per job (--set); a bad value names the file, key and values."""
    import yaml

    node_local = ("submit", "allreduce", "--nodes", "2", "--dry-run", "--set", "python.stage=node-local")
    per_job = hpclaunch(*node_local, "--profile", "dev-slurm", "--set", "python.stage_fallback=shared")
    assert per_job.exit_code == 0, per_job.output
    assert "envstage pack --cache \"${HOME}/.hpclaunch/assets/envs\" --print-path --fallback)" in per_job.output
    assert "python.stage_fallback shared: every node runs the ranks from the shared python environment" \
        in per_job.output
    assert "hpclaunch_stamp env_fallback" in per_job.output and 'if [ -n "${HPCLAUNCH_ENV_KEY:-}" ]' in per_job.output
    failing = hpclaunch(*node_local, "--profile", "dev-slurm")  # the default: fail
    assert "--fallback" not in failing.output and "env_fallback" not in failing.output
    assert 'echo "hpclaunch: error: $stage_failed (above)" >&2' in failing.output

    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["python"] = {"stage_fallback": "shared"}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    profile = hpclaunch(*node_local, "--profile", str(tmp_path / "p.yaml"))
    assert profile.exit_code == 0 and "--fallback" in profile.output, profile.output
    over = hpclaunch(*node_local, "--profile", str(tmp_path / "p.yaml"), "--set", "python.stage_fallback=fail")
    assert over.exit_code == 0 and "--fallback" not in over.output, over.output

    bad = hpclaunch(*node_local, "--profile", "dev-slurm", "--set", "python.stage_fallback=yes")
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "--set python.stage_fallback=yes: python.stage_fallback: Input should be 'fail' or 'shared'" in bad.stderr
    data["python"] = {"stage": "node-local", "stage_fallback": "share"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
    bad = hpclaunch("submit", "allreduce", "--profile", str(tmp_path / "bad.yaml"), "--dry-run")
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert f"{tmp_path / 'bad.yaml'}: python.stage_fallback: Input should be 'fail' or 'shared' (got 'share')" \
        in bad.stderr


def test_a_node_local_python_with_a_container_is_refused(hpclaunch, hpc_home):
    profile = REPO / "tests" / "fixtures" / "container_profiles" / "local-apptainer.yaml"
    result = hpclaunch("submit", "allreduce", "--profile", str(profile), "--set", "python.stage=node-local",
                       "--dry-run")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "python.stage: node-local copies the host's python environment" in result.stderr


def test_keys_built_from_a_node_copy_path_are_the_store_paths_keys(tmp_path, monkeypatch):
    """A recipe keys its data by its tokenizer's path: node1's and node2's copies must give the shared key."""
    from hpclaunch.runtime.train import assets, nodeassets

    store = tmp_path / "store"
    tokenizer = _tree(store / "generated" / "tokenizers" / "abc")
    shared_key = assets.fingerprint("blocks", str(tokenizer), 128)
    monkeypatch.setenv("HPCLAUNCH_ASSET_STORE", str(store))
    monkeypatch.setenv("HPCLAUNCH_NODE_ASSETS", "1")
    monkeypatch.setenv("HPCLAUNCH_NODE_SCRATCH", str(tmp_path / "scratch"))
    copy = nodeassets.local_copy(tokenizer, store)
    assert copy != tokenizer and (copy / "a.txt").read_text() == "alpha"
    assert assets.fingerprint("blocks", str(copy), 128) == shared_key
    assert assets.fingerprint("blocks", str(copy), 256) != shared_key
