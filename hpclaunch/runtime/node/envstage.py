"""The job's Python environment on node-local disk (profile ``python.stage: node-local``).

    python -m hpclaunch.runtime.node.envstage pack --cache STORE/envs        (once, in the job script)
        packs the environment of the python that runs it (sys.prefix: a venv or a conda env) into
        CACHE/<key>.sqfs (squashfs-tools' mksquashfs) + CACHE/<key>.json, once per key; prints the key
    python -m hpclaunch.runtime.node.envstage node --cache STORE/envs --key KEY --scratch SCRATCH
        (one task per node) unpacks the image to SCRATCH/<host>/envs/KEY (unsquashfs) through nodestage.stage:
        a node that holds KEY intact skips it; prints one JSON line (node, result, seconds)
    either with --fallback (python.stage_fallback shared): a failure is printed as a warning, not an error (the job
        script then runs every node's ranks from the shared environment); it still exits 1

The key is a hash of the environment's file list (path, size, mtime, link target; ``__pycache__`` left out):
a package installed or upgraded gives another key. Packing reads the shared filesystem once per key; the ranks
then start from local disk, where opening the interpreter's modules costs no metadata round trip to the shared
filesystem.

An environment does not move by itself; ``relocate`` fixes, in the unpacked copy, what names the old prefix:

    bin/*          shebangs of console scripts (``#!/old/bin/python`` -> the copy's python: torchrun, deepspeed),
                   activate scripts (VIRTUAL_ENV=...), any other small text file naming the prefix
    pyvenv.cfg     lines naming the prefix (``home`` names the base interpreter, outside the env: kept)
    *.pth          path entries under the prefix (an editable install pointing at a checkout elsewhere is kept:
                   hpclaunch itself stays on the shared path, found through the job's PYTHONPATH or its .pth)
    symlinks       absolute links into the prefix, re-aimed at the copy
    ELF rpaths     RPATH/RUNPATH entries under the prefix of compiled extensions are rewritten to $ORIGIN-relative
                   ones in place (elfpaths.py); one that does not fit is reported and keeps the shared path

Standard library only, plus squashfs-tools on the login/batch node and the compute nodes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from hpclaunch.runtime.node import elfpaths
from hpclaunch.runtime.node.nodestage import StageError, node_name, run_tool, stage, unsquash

_TEXT_LIMIT = 1 << 20


def env_prefix() -> Path:
    """The environment this python runs in: a venv or a conda env; an error for a bare system interpreter."""
    prefix = Path(sys.prefix)
    if prefix == Path(sys.base_prefix) and not (prefix / "conda-meta").is_dir():
        raise StageError(f"python.stage node-local packs a venv or conda environment; {sys.executable} runs in "
                         f"none (its prefix {prefix} is the system's)")
    return prefix


def env_key(prefix: Path) -> str:
    h = hashlib.sha256(str(prefix).encode())
    for folder, dirs, names in os.walk(prefix):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            p = Path(folder, name)
            st = p.lstat()
            link = os.readlink(p) if p.is_symlink() else ""
            h.update(f"{p.relative_to(prefix)}\0{st.st_size}\0{st.st_mtime_ns}\0{link}\n".encode())
    return h.hexdigest()[:24]


def pack(prefix: Path, cache: Path) -> dict:
    """CACHE/<key>.sqfs and its record CACHE/<key>.json, made once per key (an image appears only complete)."""
    key = env_key(prefix)
    record_path = cache / f"{key}.json"
    if record_path.is_file():
        record = json.loads(record_path.read_text())
        if _image_size(cache / f"{key}.sqfs") == record["bytes"]:
            return dict(record, result="warm")
        record_path.unlink()  # its image is gone or of another size (cut short, overwritten): packed again
    cache.mkdir(parents=True, exist_ok=True)
    image, tmp = cache / f"{key}.sqfs", cache / f".{key}.sqfs.tmp-{os.getpid()}"
    t0 = time.monotonic()
    try:
        run_tool(["mksquashfs", str(prefix), str(tmp), "-noappend", "-comp", "lz4", "-no-progress", "-quiet"])
        os.replace(tmp, image)
    finally:
        tmp.unlink(missing_ok=True)
    record = {"key": key, "prefix": str(prefix), "image": str(image), "bytes": image.stat().st_size,
              "unpacked_bytes": sum(f.stat().st_size for f in prefix.rglob("*") if f.is_file() and not f.is_symlink())}
    tmp_record = cache / f".{key}.json.tmp-{os.getpid()}"
    tmp_record.write_text(json.dumps(record))
    os.replace(tmp_record, record_path)
    return dict(record, result="packed", seconds=round(time.monotonic() - t0, 3))


def _image_size(image: Path) -> int | None:
    try:
        return image.stat().st_size
    except OSError:
        return None


def unpack(record: dict, dest: Path) -> str:
    """The packed environment `record` at `dest` on this node (nodestage.stage: warm, copied or recopied)."""
    image, old = Path(record["image"]), record["prefix"]

    def fill(tmp: Path) -> None:
        try:
            unsquash(image)(tmp)
        except StageError as e:  # which image: a damaged one is removed by hand (docs/fast-start.md)
            raise StageError(f"{e} (image {image})") from e
        relocate(tmp, old, str(dest))

    return stage(dest, record["key"], fill, need_bytes=int(record.get("unpacked_bytes", 0)))


def relocate(root: Path, old: str, new: str) -> dict[str, list[str]]:
    """Rewrite what names the prefix `old` in the copy at `root` (its final place: `new`); returns what changed,
    by kind, and the rpaths that could not be rewritten (``rpath_kept``)."""
    done: dict[str, list[str]] = {"text": [], "links": [], "rpath": [], "rpath_kept": []}
    old_b, new_b = old.encode(), new.encode()
    for folder, _dirs, names in os.walk(root):
        for name in names:
            p = Path(folder, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                target = os.readlink(p)
                if target == old or target.startswith(old + "/"):
                    p.unlink()
                    p.symlink_to(new + target[len(old):])
                    done["links"].append(rel)
            elif _rewritable_text(rel, p) and _replace_in_file(p, old_b, new_b):
                done["text"].append(rel)
            elif ".so" in name:
                fixed, kept = elfpaths.relocate_rpaths(p, old, root)
                done["rpath"] += [rel] if fixed else []
                done["rpath_kept"] += kept
    return done


def _rewritable_text(rel: str, p: Path) -> bool:
    return (rel.startswith("bin/") or rel == "pyvenv.cfg" or rel.endswith(".pth")
            or (rel.endswith(".py") and "__editable__" in rel)) and p.stat().st_size < _TEXT_LIMIT


def _replace_in_file(p: Path, old: bytes, new: bytes) -> bool:
    data = p.read_bytes()
    if old not in data or b"\0" in data[:8192]:
        return False
    mode = p.stat().st_mode
    p.write_bytes(data.replace(old, new))
    os.chmod(p, mode)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.envstage", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="pack this python's environment into CACHE once per key; print the key")
    a.add_argument("--cache", type=Path, required=True)
    b = sub.add_parser("node", help="unpack KEY to ROOT/envs/KEY on this node unless it is there intact")
    b.add_argument("--cache", type=Path, required=True)
    b.add_argument("--key", required=True)
    b.add_argument("--scratch", type=Path, required=True, help="node-local scratch; this node's host name is added")
    for sub_parser in (a, b):
        sub_parser.add_argument("--fallback", action="store_true", help="python.stage_fallback shared: a failure is "
                                "a warning (the job runs the ranks from the shared environment), not an error")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    try:
        if args.cmd == "pack":
            record = pack(env_prefix(), args.cache)
            print(f"hpclaunch: python environment {record['prefix']}: {record['result']} as {record['key']} "
                  f"({record['bytes'] / 2**20:.0f} MiB, {time.monotonic() - t0:.1f} s)", file=sys.stderr)
            print(record["key"])
            return 0
        record = json.loads((args.cache / f"{args.key}.json").read_text())
        result = unpack(record, args.scratch / node_name() / "envs" / args.key)
    except (StageError, OSError, ValueError) as e:
        print(_failure(e, args.cmd, args.fallback), file=sys.stderr)
        return 1
    print(json.dumps({"node": node_name(), "env": args.key, "result": result,
                      "seconds": round(time.monotonic() - t0, 3)}), flush=True)
    return 0


def _failure(e: Exception, cmd: str, fallback: bool) -> str:
    """The one line a failure prints: the node (a StageError names it), the cause, and what the job does next."""
    cause = str(e) if isinstance(e, StageError) else f"node {node_name()}: {e}"
    if not fallback:
        return f"hpclaunch: error: {cause}"
    what = "packing" if cmd == "pack" else "copying"
    return (f"hpclaunch: warning: {cause} -- {what} the python environment failed; python.stage_fallback shared: "
            "the ranks run from the shared environment")


if __name__ == "__main__":
    sys.exit(main())
