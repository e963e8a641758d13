"""The job's Python environment on node-local disk (profile ``python.stage: node-local``).

    python -m hpclaunch.runtime.node.envstage pack --cache STORE/envs        (once, in the job script)
        packs the environment of the python that runs it (sys.prefix: a venv or a conda env) into
        CACHE/<key>.sqfs (squashfs-tools' mksquashfs) + CACHE/<key>.json, once per key; prints the key
    python -m hpclaunch.runtime.node.envstage node --cache STORE/envs --key KEY --scratch SCRATCH
        (one task per node) unpacks the image to SCRATCH/<host>/envs/KEY (unsquashfs) through nodestage.stage:
        a node that holds KEY intact skips it; prints one JSON line (node, result, seconds)
    ... node --check --key KEY --scratch SCRATCH
        (one task per node) only says whether the node holds KEY intact ("warm") or not ("missing"); reads
        nothing from the store; makes SCRATCH/.bcast, where a broadcast then writes the node's copy
    ... node --image COPY --scratch SCRATCH          (one task per node) unpacks the node's own copy of the image
    python -m hpclaunch.runtime.node.envstage pending --results FILE --nodes A,B,C
        the nodes of A,B,C that no JSON line in FILE says hold the environment (warm, copied, recopied)
    either node form with --node-id-env NAME: the JSON line's "id" is that variable's value (the scheduler's name
        of the node, which the job script hands back to the scheduler for the nodes still pending)
    either with --fallback (python.stage_fallback shared): a failure is printed as a warning, not an error (the job
        script then runs every node's ranks from the shared environment); it still exits 1

The image carries its record: its first ``HEADER`` bytes are a shell script with the record on one comment line,
the SquashFS file system follows (``unsquashfs -o 4096``), so a node that received its own copy by a broadcast
(Slurm's ``sbcast``, which sends it once from the store along Slurm's tree) unpacks it with ``node --image COPY``
reading nothing from the shared store. Run as ``IMAGE PYTHON ARGS`` it execs
``PYTHON -m hpclaunch.runtime.node.envstage node --image IMAGE ARGS`` (for a broadcast that runs what it sends,
``srun --bcast``). A failure with ``--image`` is a warning: the job script copies from the store on the nodes the
broadcast did not stage.

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
import contextlib
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

from hpclaunch.runtime.node import elfpaths
from hpclaunch.runtime.node.nodestage import StageError, node_name, run_tool, stage, unsquash, warm

_TEXT_LIMIT = 1 << 20
HEADER = 4096  # the image's shell header; the SquashFS file system starts here
_RECORD_LINE = "# hpclaunch-record: "
_STAGED = ("warm", "copied", "recopied")
RECEIVE = ".bcast"  # SCRATCH/.bcast: the folder a broadcast writes each node's copy of the image into


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
    """CACHE/<key>.sqfs and its record CACHE/<key>.json, made once per key (an image appears only complete).
    The image is self-unpacking (``header``); an image packed before that (no ``offset`` in its record) is packed
    again."""
    key = env_key(prefix)
    record_path = cache / f"{key}.json"
    if record_path.is_file():
        record = json.loads(record_path.read_text())
        if _image_size(cache / f"{key}.sqfs") == record["bytes"] and record.get("offset") == HEADER:
            return dict(record, result="warm")
        record_path.unlink()  # its image is gone, of another size (cut short, overwritten) or not self-unpacking
    cache.mkdir(parents=True, exist_ok=True)
    image, tmp = cache / f"{key}.sqfs", cache / f".{key}.sqfs.tmp-{os.getpid()}"
    t0 = time.monotonic()
    try:
        run_tool(["mksquashfs", str(prefix), str(tmp), "-noappend", "-comp", "lz4", "-no-progress", "-quiet",
                  "-o", str(HEADER)])
        record = {"key": key, "prefix": str(prefix), "image": str(image), "bytes": tmp.stat().st_size,
                  "offset": HEADER, "unpacked_bytes": sum(f.stat().st_size for f in prefix.rglob("*")
                                                          if f.is_file() and not f.is_symlink())}
        with open(tmp, "r+b") as fh:
            fh.write(header(record))
        os.chmod(tmp, 0o755)  # the broadcast runs the node's copy
        os.replace(tmp, image)
    finally:
        tmp.unlink(missing_ok=True)
    tmp_record = cache / f".{key}.json.tmp-{os.getpid()}"
    tmp_record.write_text(json.dumps(record))
    os.replace(tmp_record, record_path)
    return dict(record, result="packed", seconds=round(time.monotonic() - t0, 3))


def header(record: dict) -> bytes:
    """The image's first HEADER bytes: a shell script that runs ``envstage node --image`` on itself with the
    python it is given first, and the record on a comment line; zeros after it."""
    text = ("#!/bin/sh\n"
            "# hpclaunch: a packed python environment (docs/fast-start.md). A SquashFS file system starts at byte "
            f"{HEADER}: unsquashfs -o {HEADER} -d DIR THIS_FILE\n"
            "# Run as: THIS_FILE PYTHON --scratch SCRATCH: unpacks itself to SCRATCH/<host>/envs/<key>\n"
            f"{_RECORD_LINE}{json.dumps(record)}\n"
            'py=$1; shift\n'
            'exec "$py" -m hpclaunch.runtime.node.envstage node --image "$0" "$@"\n').encode()
    if len(text) > HEADER:
        raise StageError(f"the environment's path {record['prefix']} is too long to pack ({len(text)} bytes of "
                         f"header, {HEADER} at most)")
    return text + b"\0" * (HEADER - len(text))


def image_record(image: Path) -> dict:
    """The record written in a self-unpacking image's header (a ValueError for a file that has none)."""
    with open(image, "rb") as fh:
        head = fh.read(HEADER).decode(errors="replace")
    found = re.search("^" + re.escape(_RECORD_LINE) + "(.*)$", head, re.M)
    if not found:
        raise ValueError(f"{image} is not a packed python environment (no record in its first {HEADER} bytes)")
    return dict(json.loads(found.group(1)), image=str(image))


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
            unsquash(image, int(record.get("offset", 0)))(tmp)
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
    b.add_argument("--cache", type=Path, help="the store's envs/ folder (not with --image)")
    b.add_argument("--key", help="the environment's key (not with --image: the image's record says it)")
    b.add_argument("--image", type=Path, help="this node's own copy of the image (a broadcast's): unpacked from "
                   "there; a failure is a warning (the job script copies from the store instead)")
    b.add_argument("--check", action="store_true", help="only say whether this node holds KEY intact (warm) or not "
                   "(missing); copy nothing")
    b.add_argument("--scratch", type=Path, required=True, help="node-local scratch; this node's host name is added")
    b.add_argument("--node-id-env", metavar="NAME", help="the variable naming this node as the scheduler does: "
                   "its value is the JSON line's id")
    c = sub.add_parser("pending", help="the nodes of --nodes that no line of --results says hold the environment")
    c.add_argument("--results", type=Path, required=True)
    c.add_argument("--nodes", required=True, help="comma-separated")
    for sub_parser in (a, b):
        sub_parser.add_argument("--fallback", action="store_true", help="python.stage_fallback shared: a failure is "
                                "a warning (the job runs the ranks from the shared environment), not an error")
    args = p.parse_args(argv)
    if args.cmd == "pending":
        print(",".join(pending(args.results, args.nodes.split(","))))
        return 0
    if args.cmd == "node" and not args.image and not (args.key and (args.cache or args.check)):
        p.error("node needs --key and --cache (or --check), or --image")
    t0 = time.monotonic()
    received = args.cmd == "node" and args.image is not None
    try:
        if args.cmd == "pack":
            record = pack(env_prefix(), args.cache)
            print(f"hpclaunch: python environment {record['prefix']}: {record['result']} as {record['key']} "
                  f"({record['bytes'] / 2**20:.0f} MiB, {time.monotonic() - t0:.1f} s)", file=sys.stderr)
            print(record["key"])
            return 0
        line = _node(args)
    except (StageError, OSError, ValueError) as e:
        print(_failure(e, args.cmd, args.fallback, received), file=sys.stderr)
        return 1
    if args.node_id_env:
        line["id"] = os.environ.get(args.node_id_env, "")
    print(json.dumps(dict(line, seconds=round(time.monotonic() - t0, 3))), flush=True)
    return 0


def _node(args: argparse.Namespace) -> dict:
    """The node's part (check; unpack the image it received; unpack the store's): its JSON line's fields."""
    if args.check:
        with contextlib.suppress(OSError):  # where a broadcast writes this node's copy (the next step's)
            (args.scratch / RECEIVE).mkdir(parents=True, exist_ok=True)
        dest = args.scratch / node_name() / "envs" / args.key
        return {"node": node_name(), "env": args.key, "result": "warm" if _warm(dest, args.key) else "missing"}
    if args.image:
        record, via = image_record(args.image), "broadcast"
    else:
        record, via = json.loads((args.cache / f"{args.key}.json").read_text()), "store"
    result = unpack(record, args.scratch / node_name() / "envs" / record["key"])
    return {"node": node_name(), "env": record["key"], "result": result, "via": via}


def _warm(dest: Path, key: str) -> bool:
    """`dest` holds `key` intact; False too where the node cannot even look (the copy that follows says why)."""
    try:
        return warm(dest, key)
    except OSError:
        return False


def pending(results: Path, nodes: list[str]) -> list[str]:
    """The nodes (their ids: the scheduler's names) that no JSON line of `results` says hold the environment."""
    done = set()
    try:
        text = results.read_text(errors="replace")
    except OSError:
        text = ""
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("result") in _STAGED:
            done.add(line.get("id") or line.get("node"))
    return [n for n in nodes if n and n not in done]


def _failure(e: Exception, cmd: str, fallback: bool, received: bool) -> str:
    """The one line a failure prints: the node (a StageError names it), the cause, and what the job does next."""
    cause = str(e) if isinstance(e, StageError) else f"node {node_name()}: {e}"
    if received:  # a broadcast's copy: the job script copies from the store next, and that says what fails for good
        return (f"hpclaunch: warning: {cause} -- unpacking the broadcast copy of the python environment failed; "
                "the node copies it from the asset store instead")
    if not fallback:
        return f"hpclaunch: error: {cause}"
    what = "packing" if cmd == "pack" else "copying"
    return (f"hpclaunch: warning: {cause} -- {what} the python environment failed; python.stage_fallback shared: "
            "the ranks run from the shared environment")


if __name__ == "__main__":
    sys.exit(main())
