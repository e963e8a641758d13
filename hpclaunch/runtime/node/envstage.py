"""The job's Python environment on node-local disk (profile ``python.stage: node-local``).

    python -m hpclaunch.runtime.node.envstage pack --cache STORE/envs        (once, in the job script)
        packs the environment of the python that runs it (sys.prefix: a venv or a conda env) into
        CACHE/<key>.sqfs (squashfs-tools' mksquashfs) + CACHE/<key>.json, once per key; prints the key, and with
        --print-path a second line: the folder that holds this hpclaunch (the job script's PYTHONPATH for the OS's
        python on a node that does not hold its copy yet: the node modules are standard library only)
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

The image also carries what the environment needs from outside it on a shared path (envcarry.py): the base
interpreter a venv links to (unless it is the OS's own, under /usr) and hpclaunch's own package of an editable
install, each under ``.hpclaunch/`` in the node's copy; the key hashes them too.

An environment does not move by itself; ``relocate`` fixes, in the unpacked copy, what names the old prefix or a
carried part's shared path:

    bin/*          shebangs of console scripts (``#!/old/bin/python`` -> the copy's python: torchrun, deepspeed),
                   activate scripts (VIRTUAL_ENV=...), any other small text file naming the prefix
    pyvenv.cfg     lines naming the prefix, and ``home``/``executable`` naming a carried base interpreter
    *.pth          path entries under the prefix or a carried package, and a line naming the folder above a carried
                   hpclaunch (its checkout); an editable install's finder mapping likewise
    symlinks       absolute links into the prefix (``bin/python`` into a carried interpreter), re-aimed at the copy
    ELF rpaths     RPATH/RUNPATH entries under the prefix (or the carried interpreter's, its ``bin/python3.X``
                   included) are rewritten to $ORIGIN-relative ones in place (elfpaths.py); one that does not fit
                   is reported and keeps the shared path

Standard library only, plus squashfs-tools on the login/batch node and the compute nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import time
from pathlib import Path

from hpclaunch.runtime.node import elfpaths, envcarry
from hpclaunch.runtime.node.nodestage import StageError, node_name, run_tool, stage, unsquash, warm

_TEXT_LIMIT = 1 << 20
HEADER = 4096  # the image's shell header; the SquashFS file system starts here
_RECORD_LINE = "# hpclaunch-record: "
_STAGED = ("warm", "copied", "recopied")
PRUNE_KEEP, PRUNE_IDLE_S = 2, 3600.0  # a new image keeps 2 older ones of its environment, and those used within 1 h
RECEIVE = ".bcast"  # SCRATCH/.bcast: the folder a broadcast writes each node's copy of the image into


def env_prefix() -> Path:
    """The environment this python runs in: a venv or a conda env; an error for a bare system interpreter."""
    prefix = Path(sys.prefix)
    if prefix == Path(sys.base_prefix) and not (prefix / "conda-meta").is_dir():
        raise StageError(f"python.stage node-local packs a venv or conda environment; {sys.executable} runs in "
                         f"none (its prefix {prefix} is the system's)")
    return prefix


def env_key(prefix: Path, carried: list[envcarry.Part] | None = None) -> str:
    """The image's key: the environment's file list, and what the image carries besides (envcarry.key_lines)."""
    h = hashlib.sha256(str(prefix).encode())
    for folder, dirs, names in os.walk(prefix):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            p = Path(folder, name)
            st = p.lstat()
            link = os.readlink(p) if p.is_symlink() else ""
            h.update(f"{p.relative_to(prefix)}\0{st.st_size}\0{st.st_mtime_ns}\0{link}\n".encode())
    for part in carried or []:
        for line in envcarry.key_lines(part):
            h.update(line.encode())
    return h.hexdigest()[:24]


def pack(prefix: Path, cache: Path, carried: list[envcarry.Part] | None = None) -> dict:
    """CACHE/<key>.sqfs and its record CACHE/<key>.json, made once per key (an image appears only complete), with
    the `carried` parts (envcarry.py: the base interpreter, hpclaunch's source) appended under their own names.
    The image is self-unpacking (``header``); an image packed before that (no ``offset`` in its record) is packed
    again."""
    carried = carried or []
    key = env_key(prefix, carried)
    record_path = cache / f"{key}.json"
    if record_path.is_file():
        record = json.loads(record_path.read_text())
        if _image_size(cache / f"{key}.sqfs") == record["bytes"] and record.get("offset") == HEADER:
            with contextlib.suppress(OSError):
                os.utime(record_path)  # its last use: what prune goes by
            return dict(record, result="warm")
        record_path.unlink()  # its image is gone, of another size (cut short, overwritten) or not self-unpacking
    cache.mkdir(parents=True, exist_ok=True)
    image, tmp = cache / f"{key}.sqfs", cache / f".{key}.sqfs.tmp-{os.getpid()}"
    t0 = time.monotonic()
    try:
        run_tool(["mksquashfs", str(prefix), str(tmp), "-noappend", "-comp", "lz4", "-no-progress", "-quiet",
                  "-o", str(HEADER)])
        _append(tmp, prefix, carried)
        record = {"key": key, "prefix": str(prefix), "image": str(image), "bytes": tmp.stat().st_size,
                  "offset": HEADER, "unpacked_bytes": _tree_bytes(prefix) + sum(_tree_bytes(c.source, c.exclude)
                                                                                for c in carried),
                  "carried": [c.as_record() for c in carried]}
        with open(tmp, "r+b") as fh:
            fh.write(header(record))
        os.chmod(tmp, 0o755)  # the broadcast runs the node's copy
        os.replace(tmp, image)
    finally:
        tmp.unlink(missing_ok=True)
    tmp_record = cache / f".{key}.json.tmp-{os.getpid()}"
    tmp_record.write_text(json.dumps(record))
    os.replace(tmp_record, record_path)
    return dict(record, result="packed", seconds=round(time.monotonic() - t0, 3), pruned=prune(cache, record))


def prune(cache: Path, record: dict, keep: int = PRUNE_KEEP, idle_s: float = PRUNE_IDLE_S) -> list[str]:
    """Remove the older images of `record`'s environment from the store: all but the `keep` newest others, those
    unused (packed or found warm) for `idle_s`; the keys removed. An edited hpclaunch or an installed package gives a
    new image of the whole environment (hundreds of MB): without this, the store would keep one per edit."""
    others = []
    for path in cache.glob("*.json"):
        try:
            other = json.loads(path.read_text())
            used = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        if other.get("prefix") == record["prefix"] and other.get("key") != record["key"]:
            others.append((used, path))
    removed = []
    for used, path in sorted(others, reverse=True)[keep:]:
        if used < time.time() - idle_s:
            with contextlib.suppress(OSError):  # another user's, or gone: packing goes on
                (cache / f"{path.stem}.sqfs").unlink(missing_ok=True)
                path.unlink(missing_ok=True)
                removed.append(path.stem)
    return removed


def _append(image: Path, prefix: Path, carried: list[envcarry.Part]) -> None:
    """Append each carried part to the image as a folder of its own name at the image's root (unpack moves it)."""
    names = {p.name for p in prefix.iterdir()}
    for part in carried:
        if part.source.name in names:
            raise StageError(f"cannot carry {part.source} in the image of {prefix}: the environment has an entry "
                             f"named {part.source.name} already (set {envcarry.ENV_LOCAL} to leave it out)")
        names.add(part.source.name)
        exclude = [w for e in part.exclude for w in ("-e", e)]
        run_tool(["mksquashfs", str(part.source), str(image), "-keep-as-directory", "-no-progress", "-quiet",
                  "-o", str(HEADER), *exclude])


def _tree_bytes(root: Path, exclude: tuple[str, ...] = ()) -> int:
    """The bytes of the regular files under `root`, but those under `exclude` (relative to it)."""
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if str(Path(folder, d).relative_to(root)) not in exclude]
        total += sum(st.st_size for st in (Path(folder, n).lstat() for n in names) if stat.S_ISREG(st.st_mode))
    return total


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

    carried = record.get("carried", [])

    def fill(tmp: Path) -> None:
        try:
            unsquash(image, int(record.get("offset", 0)))(tmp)
        except StageError as e:  # which image: a damaged one is removed by hand (docs/fast-start.md)
            raise StageError(f"{e} (image {image})") from e
        if carried:
            os.chmod(tmp, 0o755)  # an appended image's root is 0777
            envcarry.place(tmp, carried)
        relocate(tmp, old, str(dest), carried)
        envcarry.write_pth(tmp, str(dest), carried)

    return stage(dest, record["key"], fill, need_bytes=int(record.get("unpacked_bytes", 0)))


def relocate(root: Path, old: str, new: str, carried: list[dict] | None = None) -> dict[str, list[str]]:
    """Rewrite what names the prefix `old` in the copy at `root` (its final place: `new`), and the shared paths of
    what the image carried (envcarry.moves: the base interpreter, hpclaunch's source) as their places in the copy;
    returns what changed, by kind, and the rpaths that could not be rewritten (``rpath_kept``)."""
    carried = carried or []
    moves = sorted([(old, new), *envcarry.moves(carried, new)], key=lambda m: -len(m[0]))  # the longest first
    roots = {o: root / Path(n).relative_to(new) for o, n in moves}
    pattern = re.compile(b"(" + b"|".join(re.escape(o.encode()) for o, _ in moves) + rb")(?![\w.+-])")
    to = {o.encode(): n.encode() for o, n in moves}
    pth_lines = envcarry.pth_moves(carried, new)
    done: dict[str, list[str]] = {"text": [], "links": [], "rpath": [], "rpath_kept": []}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            p = Path(folder, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                target = os.readlink(p)
                moved = next((n + target[len(o):] for o, n in moves if target == o or target.startswith(o + "/")),
                             None)
                if moved is not None:
                    p.unlink()
                    p.symlink_to(moved)
                    done["links"].append(rel)
            elif _rewritable_text(rel, p) and _replace_in_file(p, pattern, to, pth_lines if name.endswith(".pth")
                                                                else {}):
                done["text"].append(rel)
            elif ".so" in name or Path(rel).parent.name == "bin":
                for o in (o for o, _n in moves if roots[o] in p.parents):  # the copies this file is in
                    fixed, kept = elfpaths.relocate_rpaths(p, o, roots[o])
                    done["rpath"] += [rel] if fixed else []
                    done["rpath_kept"] += kept
    return done


def _rewritable_text(rel: str, p: Path) -> bool:
    return (Path(rel).parent.name == "bin" or rel == "pyvenv.cfg" or rel.endswith(".pth")
            or (rel.endswith(".py") and "__editable__" in rel)) and p.stat().st_size < _TEXT_LIMIT


def _replace_in_file(p: Path, pattern: re.Pattern[bytes], to: dict[bytes, bytes], lines: dict[str, str]) -> bool:
    """Replace each path `pattern` finds (one of `to`'s keys, not followed by more of a file name) and each whole
    line of `lines` in the text file `p`; False for a binary file or one without any."""
    data = p.read_bytes()
    if b"\0" in data[:8192]:
        return False
    new = pattern.sub(lambda m: to[m.group(1)], data)
    if lines:  # a .pth: a line that is a moved folder
        out = []
        for line in new.splitlines(keepends=True):
            body = line.rstrip(b"\r\n")
            moved = lines.get(body.decode(errors="replace"))
            out.append(line if moved is None else moved.encode() + line[len(body):])
        new = b"".join(out)
    if new == data:
        return False
    mode = p.stat().st_mode
    p.write_bytes(new)
    os.chmod(p, mode)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.envstage", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="pack this python's environment into CACHE once per key; print the key")
    a.add_argument("--cache", type=Path, required=True)
    a.add_argument("--print-path", action="store_true", help="a second line: the folder that holds hpclaunch")
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
            prefix = env_prefix()
            record = pack(prefix, args.cache, envcarry.current(prefix))
            also = "".join(f", {c['name']} {c['source']}" for c in record.get("carried", []))
            pruned = f"; its older images removed from the store: {', '.join(record['pruned'])}" \
                if record.get("pruned") else ""
            print(f"hpclaunch: python environment {record['prefix']}{also}: {record['result']} as {record['key']} "
                  f"({record['bytes'] / 2**20:.0f} MiB, {time.monotonic() - t0:.1f} s){pruned}", file=sys.stderr)
            print(record["key"])
            if args.print_path:
                print(envcarry.PACKAGE.parent)
            return 0
        line = _node(args)
    except (StageError, OSError, ValueError) as e:
        print(_failure(e, args.cmd, args.fallback, received), file=sys.stderr)
        return 1
    if args.node_id_env:
        line["id"] = os.environ.get(args.node_id_env, "")
    if received:  # which python unpacked the broadcast copy (the job script's: the OS's where it will do)
        line["python"] = sys.executable
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
