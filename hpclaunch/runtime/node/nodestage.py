"""Put a content-addressed artifact on a node's local scratch once: ``stage(dest, key, fill)``.

An artifact is a folder (a tree, or one file inside a folder) named by its key (a content hash). ``stage``
makes ``dest`` hold it:

    warm       ``dest`` holds ``key`` already and every file it recorded has its recorded size: nothing copied
    copied     ``dest`` did not exist: ``fill`` wrote it into a temporary sibling, then it was renamed
    recopied   ``dest`` held another key, or a file was missing or had another size (a corrupt copy): replaced

``dest/.hpclaunch-staged.json`` records the key and every file's size; it is written last, inside the
temporary folder, so a copy that dies half-way leaves no ``dest`` (only a ``.tmp-`` sibling, removed by the
next stage) and is never used. One process per node stages a given ``dest`` at a time (``flock`` on a sibling
lock file); others wait and then find it warm. Used for the packed Python environment (envstage.py), for
assets (runtime/train/assets.py) and for container images. Standard library only; also runnable by one task
per node:

    python -m hpclaunch.runtime.node.nodestage tree|file|squashfs SRC DEST KEY   -> one JSON line: node, dest,
                                                                                   result, seconds

(``squashfs``: SRC is a SquashFS file, unpacked into DEST: the container images of docs/containers.md.)

Old copies are cleaned up: a process that stages ``dest`` holds a shared lock on its sibling use file
(``.<name>.use``) until it exits, and the marker's time is the copy's last use (touched when found warm). Each
stage first removes, from ``dest``'s folder only, the copies of other names (a folder with a marker) unused for
longer than ``HPCLAUNCH_NODE_SCRATCH_KEEP_DAYS`` (the profile's ``node_scratch_keep_days``; default 3), skipping
any that a process is staging or using (both locks tried without waiting), and says on stderr what it removed.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = ".hpclaunch-staged.json"
ENV_KEEP_DAYS = "HPCLAUNCH_NODE_SCRATCH_KEEP_DAYS"
KEEP_DAYS = 3.0  # a copy of another name unused this long is removed when its folder is staged into
_IN_USE: dict[Path, int] = {}  # dest -> the open use file whose shared lock this process holds until it exits


class StageError(Exception):
    """Staging on this node failed: the message names the node and the cause."""


def node_name() -> str:
    return socket.gethostname().split(".")[0]


def _files(root: Path) -> dict[str, int]:
    """Every regular file under `root` (symlinks not followed) -> its size."""
    sizes: dict[str, int] = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            p = Path(folder, name)
            if not p.is_symlink():
                sizes[str(p.relative_to(root))] = p.stat().st_size
    sizes.pop(MARKER, None)
    return sizes


def intact(dest: Path, key: str) -> bool:
    """`dest` holds `key` and every file it recorded is there with its recorded size (a stat per file)."""
    try:
        record = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if record.get("key") != key:
        return False
    for rel, size in record.get("files", {}).items():
        try:
            if (dest / rel).stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def _lock_file(dest: Path, kind: str = "lock") -> Path:
    """The sibling file locked while `dest` is staged ("lock") or used ("use")."""
    return dest.parent / f".{dest.name}.{kind}"


@contextmanager
def _flocked(path: Path, how: int) -> Iterator[bool]:
    """`path` flock-ed (`how`); with fcntl.LOCK_NB, False when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, how)
            held = True
        except BlockingIOError:
            held = False
        yield held
    finally:
        os.close(fd)


@contextmanager
def _locked(dest: Path) -> Iterator[None]:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _flocked(_lock_file(dest), fcntl.LOCK_EX):
        yield


def _use(dest: Path) -> None:
    """This process uses `dest` until it exits: a shared lock on its use file (no clean-up removes it meanwhile)
    and its marker's time set to now (its last use)."""
    os.utime(dest / MARKER)
    if dest not in _IN_USE:
        fd = os.open(_lock_file(dest, "use"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        _IN_USE[dest] = fd


def hold(dest: Path) -> bool:
    """Keep the staged copy `dest` from clean-up while this process lives (a rank's wrapper running the rank from
    the node's copy of the python environment, which a short-lived stager task put there); False where `dest` is
    not a staged copy."""
    if not (dest / MARKER).is_file():
        return False
    _use(dest)
    return True


def keep_days() -> float:
    """How long a copy may stay unused: HPCLAUNCH_NODE_SCRATCH_KEEP_DAYS (the profile's), else KEEP_DAYS."""
    try:
        days = float(os.environ.get(ENV_KEEP_DAYS) or KEEP_DAYS)
    except ValueError:
        return KEEP_DAYS
    return days if days > 0 else KEEP_DAYS


def _unused_since(copy: Path, cutoff: float) -> bool:
    """`copy` is a staged copy (it has a marker, not through a link) last used before `cutoff`."""
    try:
        return not copy.is_symlink() and (copy / MARKER).stat().st_mtime < cutoff
    except OSError:
        return False


def clean(dest: Path, days: float) -> list[str]:
    """Remove the copies beside `dest` (other names in its folder, nothing else) unused for more than `days`,
    unless a process stages or uses one now; the names removed."""
    cutoff, removed = time.time() - days * 86400, []
    for other in sorted(dest.parent.iterdir()):
        if other.name.startswith(".") or other.name == dest.name or not _unused_since(other, cutoff):
            continue
        try:
            with (_flocked(_lock_file(other), fcntl.LOCK_EX | fcntl.LOCK_NB) as free,
                  _flocked(_lock_file(other, "use"), fcntl.LOCK_EX | fcntl.LOCK_NB) as unused):
                if free and unused and _unused_since(other, cutoff):  # not used since it was first looked at
                    old = dest.parent / f".{other.name}.tmp-old-{os.getpid()}"  # a stage of it removes any rest
                    os.replace(other, old)
                    shutil.rmtree(old, ignore_errors=True)
                    removed.append(other.name)
        except OSError:
            continue  # not ours to remove (permissions), or gone: staging goes on
    return removed


def _clean_before(dest: Path) -> None:
    days = keep_days()
    removed = clean(dest, days)
    if removed:
        print(f"hpclaunch: node {node_name()}: removed {len(removed)} node-local copies unused for more than "
              f"{days:g} days from {dest.parent}: {', '.join(removed)}", file=sys.stderr, flush=True)


def _check_space(dest: Path, need_bytes: int) -> None:
    free = shutil.disk_usage(dest.parent).free
    if need_bytes and free < need_bytes * 1.05:
        raise StageError(f"node {node_name()}: {dest.parent} has {free / 2**30:.2f} GiB free, the copy needs "
                         f"{need_bytes / 2**30:.2f} GiB")


def stage(dest: Path, key: str, fill: Callable[[Path], None], *,
          need_bytes: int | Callable[[], int] = 0) -> str:
    """Make `dest` hold artifact `key`, writing it with `fill(tmp)` when it is not there intact; returns
    'warm', 'copied' or 'recopied'. A StageError (node and cause) when the copy fails; nothing half-written
    stays under `dest`'s name. `need_bytes` (the copy's size, checked against the free space) may be a function:
    it is then asked only when there is a copy to make (a warm node does not walk the source). Copies of other
    names beside `dest` unused for longer than `keep_days()` are removed first (`clean`); this process then uses
    `dest` until it exits."""
    dest = Path(dest)
    with _locked(dest):
        _clean_before(dest)
        if intact(dest, key):
            _use(dest)
            return "warm"
        existed = dest.exists()
        for old in dest.parent.glob(f".{dest.name}.tmp-*"):
            shutil.rmtree(old, ignore_errors=True)  # a copy that died half-way (its process is gone: we hold the lock)
        tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
        try:
            _check_space(dest, need_bytes() if callable(need_bytes) else need_bytes)
            tmp.mkdir()
            fill(tmp)
            (tmp / MARKER).write_text(json.dumps({"key": key, "node": node_name(), "files": _files(tmp)}))
            _publish(tmp, dest)
        except (OSError, ValueError) as e:
            raise StageError(f"node {node_name()}: copying {key} to {dest} failed: {e}") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _use(dest)
        return "recopied" if existed else "copied"


def warm(dest: Path, key: str) -> bool:
    """`dest` holds `key` intact (then used now: its last use is now, as `stage` finding it warm); copies nothing
    and reads nothing but `dest`."""
    dest = Path(dest)
    with _locked(dest):
        if not intact(dest, key):
            return False
        _use(dest)
        return True


def _publish(tmp: Path, dest: Path) -> None:
    """Rename the complete `tmp` to `dest`, replacing an older or corrupt `dest`."""
    if dest.exists() or dest.is_symlink():
        old = dest.parent / f".{dest.name}.tmp-old-{os.getpid()}"
        os.replace(dest, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, dest)


def copy_tree(src: Path) -> Callable[[Path], None]:
    """A `fill` that copies the folder `src` (symlinks kept as links)."""
    def fill(tmp: Path) -> None:
        shutil.copytree(src, tmp, symlinks=True, dirs_exist_ok=True)
    return fill


def copy_file(src: Path) -> Callable[[Path], None]:
    """A `fill` that copies the file `src` into the folder, under its own name."""
    def fill(tmp: Path) -> None:
        shutil.copy2(src, tmp / src.name)
    return fill


def run_tool(cmd: list[str]) -> None:
    """Run an unpacking tool; a StageError naming the node, the tool and its stderr when it is missing or fails."""
    if shutil.which(cmd[0]) is None:
        raise StageError(f"node {node_name()}: {cmd[0]} is not installed (Debian/Ubuntu: squashfs-tools)")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        said = "; ".join(line.strip() for line in proc.stderr.splitlines() if line.strip())  # one message, one line
        raise StageError(f"node {node_name()}: {' '.join(cmd[:2])} ... failed ({proc.returncode}): {said[-500:]}")


def unsquash(image: Path, offset: int = 0) -> Callable[[Path], None]:
    """A `fill` that unpacks the SquashFS file `image` (its file system starting `offset` bytes in) into the
    folder."""
    def fill(tmp: Path) -> None:
        skip = ["-o", str(offset)] if offset else []
        run_tool(["unsquashfs", "-f", "-q", "-no-progress", *skip, "-d", str(tmp), str(image)])
    return fill


def tree_bytes(src: Path) -> int:
    return sum(_files(src).values()) if src.is_dir() else src.stat().st_size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.nodestage", description=__doc__.split("\n")[0])
    p.add_argument("kind", choices=("tree", "file", "squashfs"))
    p.add_argument("src", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("key")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    fills: dict[str, Callable[[Path], Callable[[Path], None]]] = {"tree": copy_tree, "file": copy_file,
                                                                  "squashfs": unsquash}
    fill = fills[args.kind](args.src)
    try:
        result = stage(args.dest, args.key, fill, need_bytes=lambda: tree_bytes(args.src))
    except (StageError, OSError) as e:
        print(f"hpclaunch: error: {e if isinstance(e, StageError) else f'node {node_name()}: {e}'}", file=sys.stderr)
        return 1
    print(json.dumps({"node": node_name(), "dest": str(args.dest), "result": result,
                      "seconds": round(time.monotonic() - t0, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
