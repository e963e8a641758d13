"""What a packed environment carries besides itself (hpclaunch/runtime/node/envcarry.py): the base interpreter a venv
links to and hpclaunch's editable source, when they are on a shared path, and the copy re-aimed at them: a fake
prefix tree (a venv, its base interpreter, a checkout) copied as a node's unpack lays it out, then relocated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.runtime.node import elfpaths, envcarry, envstage
from hpclaunch.runtime.node.envcarry import CARRY, PTH

REPO = Path(__file__).resolve().parents[2]
STDLIB = f"lib/python{sys.version_info.major}.{sys.version_info.minor}"


def _shared(root: Path) -> tuple[Path, Path, Path]:
    """(venv, base interpreter, checkout) as a pyenv python, a venv made from it and an editable install lay them
    out; the base's binary (built with gcc, when there is one) has a RUNPATH into the base's lib/."""
    base, venv, checkout = root / "apps" / "python" / "3.11.7", root / "home" / "venv", root / "home" / "checkout"
    (base / "bin").mkdir(parents=True)
    (base / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (base / "lib" / "python3.11" / "os.py").write_text("# the stdlib\n")
    if shutil.which("gcc"):
        (root / "main.c").write_text("int main(void) { return 0; }\n")
        subprocess.run(["gcc", "-o", str(base / "bin" / "python3.11"), str(root / "main.c"),
                        f"-Wl,-rpath,{base}/lib"], check=True)
    else:
        (base / "bin" / "python3.11").write_bytes(b"\x7fELF not built: no gcc")
    (base / "bin" / "python3").symlink_to("python3.11")
    (base / "bin" / "python3.11-config").write_text(f'#!/bin/sh\nprefix="{base}"\n')
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python3").symlink_to(base / "bin" / "python3")
    (venv / "bin" / "python").symlink_to("python3")
    (venv / "pyvenv.cfg").write_text(f"home = {base}/bin\ninclude-system-site-packages = false\nversion = 3.11.7\n"
                                     f"executable = {base}/bin/python3.11\n")
    (checkout / "hpclaunch").mkdir(parents=True)
    (checkout / "hpclaunch" / "__init__.py").write_text("")
    (checkout / "tests").mkdir()
    (site / "a_checkout.pth").write_text(f"{checkout}\n{checkout}-other\n")
    (site / "__editable___hpclaunch_0_1_0_finder.py").write_text(
        f"MAPPING = {{'hpclaunch': '{checkout}/hpclaunch', 'hpclaunch._bundled.templates': '{checkout}/templates'}}\n")
    return venv, base, checkout


def test_a_shared_base_interpreter_and_an_editable_hpclaunch_are_carried_the_os_python_is_not(tmp_path, monkeypatch):
    venv, base, checkout = _shared(tmp_path)
    carried = envcarry.parts(venv, base, checkout / "hpclaunch", ("/usr",))
    assert [(c.name, c.source, c.at) for c in carried] == [
        ("python", base, f"{CARRY}/python"), ("hpclaunch", checkout / "hpclaunch", f"{CARRY}/src/hpclaunch")]
    assert carried[0].exclude == (f"{STDLIB}/test", f"{STDLIB}/site-packages")  # the venv does not use the base's
    # Debian's python3 (/usr, /usr/local: on every node's own disk), hpclaunch installed in the venv: nothing extra
    assert envcarry.parts(venv, Path("/usr"), venv / STDLIB / "site-packages" / "hpclaunch", ("/usr",)) == []
    assert envcarry.parts(venv, Path("/usr/local"), None, ("/usr",)) == []
    assert envcarry.parts(base, base, None, ("/usr",)) == []  # a conda env: its interpreter is inside it
    monkeypatch.setenv(envcarry.ENV_LOCAL, f"{tmp_path}/apps:/usr")  # a site whose /apps is on every node's disk
    assert [c.name for c in envcarry.parts(venv, base, checkout / "hpclaunch", envcarry.local_prefixes())] == [
        "hpclaunch"]


def test_the_key_changes_with_the_interpreter_and_with_hpclaunchs_source(tmp_path):
    venv, base, checkout = _shared(tmp_path)
    carried = envcarry.parts(venv, base, checkout / "hpclaunch", ("/usr",))
    first = envstage.env_key(venv, carried)
    assert first != envstage.env_key(venv)
    (checkout / "hpclaunch" / "__pycache__").mkdir()
    (checkout / "hpclaunch" / "__pycache__" / "x.pyc").write_text("compiled")
    assert envstage.env_key(venv, carried) == first  # bytecode is no change
    (checkout / "hpclaunch" / "new.py").write_text("edited")
    second = envstage.env_key(venv, carried)
    assert second != first
    (base / "lib" / "libpython3.11.so.1.0").write_bytes(b"another build")
    assert envstage.env_key(venv, carried) != second


def test_the_copy_runs_its_own_interpreter_and_hpclaunch_copy(tmp_path):
    venv, base, checkout = _shared(tmp_path)
    carried = [c.as_record() for c in envcarry.parts(venv, base, checkout / "hpclaunch", ("/usr",))]
    dest = tmp_path / "node1" / "envs" / "KEY"
    shutil.copytree(venv, dest, symlinks=True)  # as unsquashfs lays out the image: the parts under their own names
    shutil.copytree(base, dest / base.name, symlinks=True)
    shutil.copytree(checkout / "hpclaunch", dest / "hpclaunch", symlinks=True)
    envcarry.place(dest, carried)
    done = envstage.relocate(dest, str(venv), str(dest), carried)
    envcarry.write_pth(dest, str(dest), carried)

    copy_base, copy_src = dest / CARRY / "python", dest / CARRY / "src"
    assert sorted(p.name for p in (dest / CARRY).iterdir()) == ["python", "src"]
    cfg = (dest / "pyvenv.cfg").read_text()
    assert f"home = {copy_base}/bin\n" in cfg and f"executable = {copy_base}/bin/python3.11\n" in cfg
    assert os.readlink(dest / "bin" / "python3") == f"{copy_base}/bin/python3"  # was the shared base's
    assert os.readlink(copy_base / "bin" / "python3") == "python3.11"  # relative: moved with it
    assert f'prefix="{copy_base}"' in (copy_base / "bin" / "python3.11-config").read_text()
    site = dest / "lib" / "python3.11" / "site-packages"
    # the checkout's line on sys.path is the copy's source folder; another folder beside it is left alone
    assert (site / "a_checkout.pth").read_text() == f"{copy_src}\n{checkout}-other\n"
    finder = (site / "__editable___hpclaunch_0_1_0_finder.py").read_text()
    assert f"'hpclaunch': '{copy_src}/hpclaunch'" in finder
    assert f"'hpclaunch._bundled.templates': '{checkout}/templates'" in finder  # not carried: unchanged
    assert (site / PTH).read_text() == "import _hpclaunch_copy\n"
    # its finder imports hpclaunch from the copy, ahead of the working directory (a checkout holding hpclaunch)
    proc = subprocess.run([sys.executable, "-c", f"import sys; sys.path.append({str(site)!r}); import _hpclaunch_copy, "
                           "hpclaunch; print(hpclaunch.__file__)"], capture_output=True, text=True, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.stdout.strip() == str(copy_src / "hpclaunch" / "__init__.py"), proc.stderr
    assert (copy_src / "hpclaunch" / "__init__.py").is_file() and not (copy_src / "tests").exists()
    if shutil.which("gcc"):
        assert [v for _, v in elfpaths.rpaths(copy_base / "bin" / "python3.11")] == ["$ORIGIN/../lib"]
        assert f"{CARRY}/python/bin/python3.11" in done["rpath"]


@pytest.mark.skipif(not (shutil.which("mksquashfs") and shutil.which("unsquashfs")),
                    reason="squashfs-tools (mksquashfs, unsquashfs) is not installed")
def test_an_image_carries_its_parts_and_unpacks_them_in_place(tmp_path):
    venv, base, checkout = _shared(tmp_path)
    (base / STDLIB / "test").mkdir()
    (base / STDLIB / "test" / "big_test.py").write_text("left out\n")
    (base / STDLIB / "site-packages" / "other.py").write_text("left out\n")
    carried = envcarry.parts(venv, base, checkout / "hpclaunch", ("/usr",))
    record = envstage.pack(venv, tmp_path / "store", carried)
    assert [c["name"] for c in record["carried"]] == ["python", "hpclaunch"]
    dest = tmp_path / "node1" / "envs" / record["key"]
    assert envstage.unpack(record, dest) == "copied"
    assert (dest / CARRY / "python" / STDLIB / "os.py").is_file()
    assert not (dest / CARRY / "python" / STDLIB / "test").exists()
    assert not (dest / CARRY / "python" / STDLIB / "site-packages" / "other.py").exists()
    assert (dest / CARRY / "src" / "hpclaunch" / "__init__.py").is_file()
    assert not (dest / base.name).exists() and not (dest / "hpclaunch").exists()
    assert os.readlink(dest / "bin" / "python3") == f"{dest}/{CARRY}/python/bin/python3"
    assert envstage.unpack(record, dest) == "warm"


SQUASHFS = bool(shutil.which("mksquashfs") and shutil.which("unsquashfs"))


@pytest.mark.skipif(not (Path("/usr/bin/python3").exists() and SQUASHFS),
                    reason="needs the OS's python3 in /usr/bin and squashfs-tools")
def test_a_venv_of_the_os_python_carries_no_interpreter_and_runs_from_its_copy(tmp_path):
    """Debian's python3 (/usr, on every node's own disk): the image holds the venv and hpclaunch's source only, and
    the copy runs the OS's interpreter with the copy's hpclaunch."""
    venv = tmp_path / "shared" / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCLAUNCH_", "VIRTUAL_ENV"))}
    packed = subprocess.run([str(venv / "bin" / "python"), "-m", "hpclaunch.runtime.node.envstage", "pack",
                             "--cache", str(tmp_path / "store")], capture_output=True, text=True,
                            env={**env, "PYTHONPATH": str(REPO)})
    assert packed.returncode == 0, packed.stderr
    record = envstage.image_record(tmp_path / "store" / f"{packed.stdout.strip()}.sqfs")
    assert [c["name"] for c in record["carried"]] == ["hpclaunch"]
    dest = tmp_path / "node1" / "envs" / record["key"]
    assert envstage.unpack(record, dest) == "copied"
    ran = subprocess.run([str(dest / "bin" / "python"), "-c", "import sys, hpclaunch; print(sys.base_prefix); "
                          "print(hpclaunch.__file__)"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ran.stdout.split() == ["/usr", str(dest / CARRY / "src" / "hpclaunch" / "__init__.py")], ran.stderr


def test_a_new_image_removes_the_older_unused_images_of_its_environment(tmp_path):
    """An edited hpclaunch gives a new image of the whole environment: the store keeps the 2 newest others and those
    used within the hour, and images of other environments."""
    cache = tmp_path / "envs"
    cache.mkdir()
    now = time.time()
    for key, prefix, used in (("old1", "/env/a", now - 7200), ("old2", "/env/a", now - 5400),
                              ("old3", "/env/a", now - 4000), ("old4", "/env/a", now - 3900),
                              ("recent", "/env/a", now - 60), ("other", "/env/b", now - 9999)):
        (cache / f"{key}.sqfs").write_bytes(b"image")
        (cache / f"{key}.json").write_text(json.dumps({"key": key, "prefix": prefix}))
        os.utime(cache / f"{key}.json", (used, used))
    assert sorted(envstage.prune(cache, {"key": "new", "prefix": "/env/a"})) == ["old1", "old2", "old3"]
    assert sorted(p.name for p in cache.iterdir()) == [
        "old4.json", "old4.sqfs", "other.json", "other.sqfs", "recent.json", "recent.sqfs"]
