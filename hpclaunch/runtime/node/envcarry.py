"""What a packed python environment carries besides itself (envstage.py), so that a node reads nothing at start from
the shared filesystem:

    python      the base interpreter a venv links to (pyvenv.cfg ``home``: the python binary, libpython, the standard
                library and its extension modules), unless it is the OS's own: ``sys.base_prefix`` under a node-local
                prefix (``/usr`` by default, which holds ``/usr/local`` too). A pyenv, conda, module or site python
                under ``$HOME``, ``/apps`` or ``/opt`` lies on the shared filesystem of a real cluster and is carried.
                Its ``site-packages`` (unless the venv includes the system's) and the standard library's test suite
                (``lib/pythonX.Y/test``) are left out. A conda env holds its interpreter already: nothing to carry.
    hpclaunch   hpclaunch's own package folder, when it is imported from outside the environment (an editable
                install's checkout, or a PYTHONPATH entry): only ``hpclaunch/``, not the checkout's tests or .git.

Each goes under ``CARRY`` in the node's copy: ``.hpclaunch/python`` and ``.hpclaunch/src/hpclaunch``. Relocating
the copy (``moves``, applied by envstage.relocate) then re-aims what named the shared paths: the venv's
``pyvenv.cfg`` (``home``, ``executable``) and ``bin/python*`` links at the copy's interpreter, whose own binary's
RUNPATH becomes ``$ORIGIN``-relative; an editable install's ``.pth`` line or finder mapping at the copy's package;
and ``PTH`` in the copy's site-packages puts a finder first on ``sys.meta_path`` that imports hpclaunch from
``.hpclaunch/src``, ahead of a PYTHONPATH that names the checkout and of the working directory ``python -m`` puts
first on ``sys.path`` (a job submitted from the checkout). The image's key hashes what is carried (``key_lines``):
a changed source gives another image.

A site whose interpreter is on every node's local disk (an image's ``/opt``) names it in
``HPCLAUNCH_NODE_LOCAL_PREFIXES`` (colon-separated; replaces the default ``/usr``) where the job is submitted:
that prefix is then not carried. Standard library only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CARRY = ".hpclaunch"
PTH_MODULE = "_hpclaunch_copy"
PTH = f"{PTH_MODULE}.pth"
ENV_LOCAL = "HPCLAUNCH_NODE_LOCAL_PREFIXES"
LOCAL_DEFAULT = ("/usr",)
PACKAGE = Path(__file__).resolve().parents[2]  # the hpclaunch package folder this module was imported from


@dataclass(frozen=True)
class Part:
    """One thing carried: its name, where it is (shared), where it goes in the copy (relative), what is left out
    (paths relative to `source`)."""

    name: str
    source: Path
    at: str
    exclude: tuple[str, ...] = ()

    def as_record(self) -> dict[str, object]:
        return {"name": self.name, "source": str(self.source), "at": self.at, "packed_as": self.source.name}


def local_prefixes() -> tuple[str, ...]:
    """The prefixes every node has on its own disk: HPCLAUNCH_NODE_LOCAL_PREFIXES, else LOCAL_DEFAULT."""
    named = [p.rstrip("/") for p in os.environ.get(ENV_LOCAL, "").split(":") if p.strip()]
    return tuple(named) or LOCAL_DEFAULT


def _under(path: Path, prefixes: tuple[str, ...]) -> bool:
    return any(str(path) == p or str(path).startswith(p + "/") for p in prefixes if p)


def parts(prefix: Path, base: Path, package: Path | None, local: tuple[str, ...]) -> list[Part]:
    """What the image of the environment `prefix` carries: the base interpreter `base` (sys.base_prefix) where it
    is not the environment itself and not node-local, and hpclaunch's package folder `package` where it lies outside
    the environment and not on a node-local path."""
    carried = []
    if base.resolve() != prefix.resolve() and not _under(base, local):
        stdlib = f"lib/python{sys.version_info.major}.{sys.version_info.minor}"
        system_site = "include-system-site-packages = true" in _read(prefix / "pyvenv.cfg")
        exclude = (f"{stdlib}/test",) + (() if system_site else (f"{stdlib}/site-packages",))
        carried.append(Part("python", base, f"{CARRY}/python", exclude))
    if package is not None and not _under(package, (str(prefix), *local)):
        carried.append(Part("hpclaunch", package, f"{CARRY}/src/{package.name}"))
    return carried


def current(prefix: Path) -> list[Part]:
    """`parts` for this python (sys.base_prefix) and this hpclaunch (the package this module was imported from)."""
    return parts(prefix, Path(sys.base_prefix), PACKAGE, local_prefixes())


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def key_lines(part: Part) -> Iterator[str]:
    """What the image's key hashes for `part`: the interpreter's version and the entries (name, size, mtime) of its
    bin/, lib/ and standard library folders (a reinstall or another build changes them; not every file: that would
    cost the shared filesystem a stat per module at every job's pack); hpclaunch's every file but bytecode."""
    yield f"carry {part.name} {part.source} {part.at}\n"
    if part.name == "python":
        yield f"{sys.version}\n"
        stdlib = part.source / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        folders = [part.source / "bin", part.source / "lib", stdlib, stdlib / "lib-dynload"]
        for folder in folders:
            for entry in sorted(_scan(folder), key=lambda e: e.name):
                st = entry.stat(follow_symlinks=False)
                yield f"{folder.name}/{entry.name}\0{st.st_size}\0{st.st_mtime_ns}\n"
        return
    for top, dirs, names in os.walk(part.source):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            st = Path(top, name).lstat()
            yield f"{Path(top, name).relative_to(part.source)}\0{st.st_size}\0{st.st_mtime_ns}\n"


def _scan(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def moves(carried: list[dict], dest: str) -> list[tuple[str, str]]:
    """(shared path, its place in the copy at `dest`) for each carried part of an image's record."""
    return [(c["source"], f"{dest}/{c['at']}") for c in carried]


def pth_moves(carried: list[dict], dest: str) -> dict[str, str]:
    """A .pth line that names the folder above a carried package (an editable install's checkout on sys.path) ->
    the copy's folder above it."""
    return {str(Path(c["source"]).parent): str(Path(dest, c["at"]).parent) for c in carried if c["name"] == "hpclaunch"}


def place(root: Path, carried: list[dict]) -> None:
    """Move the carried parts from where the image put them (its root, under their own names) to CARRY in the copy
    being made at `root`."""
    for c in carried:
        target = root / c["at"]
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(root / c["packed_as"], target)


_FINDER = """\"\"\"hpclaunch from this node's copy (hpclaunch/runtime/node/envcarry.py), ahead of every sys.path entry:
a PYTHONPATH naming the checkout, and the working directory that `python -m` puts first (a job started from the
checkout).\"\"\"
import sys
from importlib.machinery import PathFinder

SRC = {src!r}


class CopyFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        return PathFinder.find_spec(name, [SRC]) if name == "hpclaunch" else None


sys.meta_path.insert(0, CopyFinder)
"""


def write_pth(root: Path, dest: str, carried: list[dict]) -> None:
    """Where hpclaunch is carried: PTH and its module in the copy's site-packages (at `root`, its final place
    `dest`), which put a finder first on sys.meta_path that imports hpclaunch from the copy's source."""
    src = [str(Path(dest, c["at"]).parent) for c in carried if c["name"] == "hpclaunch"]
    if not src:
        return
    for site in root.glob("lib/python*/site-packages"):
        (site / f"{PTH_MODULE}.py").write_text(_FINDER.format(src=src[0]))
        (site / PTH).write_text(f"import {PTH_MODULE}\n")
