"""The RPATH/RUNPATH of a compiled extension (64-bit little-endian ELF), read and rewritten in place.

A packed environment moves; an extension whose rpath names the old prefix absolutely would still load its
libraries from the shared filesystem (or fail once it is gone). ``relocate_rpaths`` rewrites every entry under
the prefix to the same place relative to the file (``$ORIGIN/../lib``): the string is overwritten in the file's
string table, padded with NUL bytes, so nothing else in the file moves. An entry whose relative form is longer
than the string it replaces cannot be written this way and is returned as kept. Standard library only.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

_DT_NULL, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 5, 15, 29
_PT_LOAD, _PT_DYNAMIC = 1, 2


def _dynamic(f) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]] | None:  # type: ignore[no-untyped-def]
    """(dynamic entries, load segments as (vaddr, offset, filesz)) of an ELF64 LE file; None for anything else."""
    head = f.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    loads, dyn = [], None
    for i in range(phnum):
        p_type, _flags, off, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
        if p_type == _PT_LOAD:
            loads.append((vaddr, off, filesz))
        elif p_type == _PT_DYNAMIC:
            dyn = (off, filesz)
    if dyn is None:
        return None
    f.seek(dyn[0])
    raw = f.read(dyn[1])
    entries = [struct.unpack_from("<qQ", raw, i) for i in range(0, len(raw) - 15, 16)]
    return [(t, v) for t, v in entries[:next((i for i, e in enumerate(entries) if e[0] == _DT_NULL), len(entries))]
            ], loads


def _file_offset(vaddr: int, loads: list[tuple[int, int, int]]) -> int | None:
    for start, off, size in loads:
        if start <= vaddr < start + size:
            return vaddr - start + off
    return None


def _read_cstr(f, offset: int) -> bytes:  # type: ignore[no-untyped-def]
    f.seek(offset)
    out = b""
    while b"\0" not in out:
        chunk = f.read(256)
        if not chunk:
            break
        out += chunk
    return out.split(b"\0", 1)[0]


def rpaths(path: Path) -> list[tuple[int, str]]:
    """(file offset, value) of each RPATH/RUNPATH string of `path`; [] for a file that is not a 64-bit LE ELF."""
    try:
        with open(path, "rb") as f:
            parsed = _dynamic(f)
            if parsed is None:
                return []
            entries, loads = parsed
            strtab = next((v for t, v in entries if t == _DT_STRTAB), None)
            base = _file_offset(strtab, loads) if strtab is not None else None
            if base is None:
                return []
            return [(base + v, _read_cstr(f, base + v).decode("utf-8", "replace"))
                    for t, v in entries if t in (_DT_RPATH, _DT_RUNPATH)]
    except (OSError, struct.error):
        return []


def _origin(rel: str) -> str:
    return "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"


def relocate_rpaths(path: Path, old: str, root: Path) -> tuple[bool, list[str]]:
    """Rewrite `path`'s rpath entries under `old` (the prefix `root` was copied from) as $ORIGIN-relative ones.
    Returns (whether the file changed, the entries kept because their new form is longer)."""
    changed, kept = False, []
    here = os.path.relpath(path.parent, root)
    for offset, value in rpaths(path):
        parts = value.split(":")
        new_parts = [_origin(os.path.relpath(e[len(old):].lstrip("/") or ".", here))
                     if e == old or e.startswith(old + "/") else e for e in parts]
        if new_parts == parts:
            continue
        new = ":".join(new_parts).encode()
        if len(new) > len(value.encode()):
            kept.append(f"{path}: {value}")
            continue
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(new + b"\0" * (len(value.encode()) - len(new)))
        changed = True
    return changed, kept
