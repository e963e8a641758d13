"""Reading rank logs: whole (in blocks), the last N lines (seeking back from the end, so a multi-GB
file costs only the blocks it needs), filtered by a regular expression, merged across ranks and restarts."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hpclaunch.state.runfiles import LogFile

BLOCK = 1 << 20
TAIL_BLOCK = 64 * 1024


@dataclass(frozen=True)
class Line:
    rank: int | None  # None: a line of the batch output
    restart: int
    text: str

    def prefixed(self) -> str:
        who = "job" if self.rank is None else f"rank{self.rank}"
        return f"[{who}] {self.text}"


def iter_lines(path: Path, pattern: re.Pattern[bytes] | None = None, start: int = 0) -> Iterator[bytes]:
    """Complete lines of `path` from byte `start` (without newlines), read in 1 MiB blocks."""
    with open(path, "rb") as f:
        f.seek(start)
        rest = b""
        while True:
            block = f.read(BLOCK)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n")
            if cut < 0:
                rest = block
                continue
            rest = block[cut + 1:]
            lines = block[:cut].split(b"\n")
            if pattern is not None:
                lines = [ln for ln in lines if pattern.search(ln)]
            yield from lines
        if rest and (pattern is None or pattern.search(rest)):
            yield rest


def tail_lines(path: Path, n: int, pattern: re.Pattern[bytes] | None = None) -> list[bytes]:
    """The last `n` lines of `path` (matching `pattern` if given), reading backwards block by block."""
    if n <= 0:
        return []
    out: list[bytes] = []
    with open(path, "rb") as f:
        pos = f.seek(0, os.SEEK_END)
        if pos and (f.seek(pos - 1), f.read(1))[1] == b"\n":
            pos -= 1  # the file's final newline ends the last line; it does not start an empty one
            if pos == 0:  # the file is one empty line
                return [b""] if pattern is None or pattern.search(b"") else []
        partial = b""  # the start of a line whose beginning lies in an earlier block
        step = TAIL_BLOCK if pattern is None else BLOCK
        while pos > 0 and len(out) < n:
            size = min(step, pos)
            pos -= size
            f.seek(pos)
            data = f.read(size) + partial
            if pos > 0:
                cut = data.find(b"\n")
                if cut < 0:
                    partial = data
                    continue
                partial, data = data[:cut], data[cut + 1:]
            else:
                partial = b""
            lines = data.split(b"\n")
            if pattern is not None:
                lines = [ln for ln in lines if pattern.search(ln)]
            out[:0] = lines
    return out[-n:]


def read_tail_bytes(path: Path, size: int) -> tuple[int, bytes]:
    """(offset, data): the last `size` bytes of the file."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        start = max(0, end - size)
        f.seek(start)
        return start, f.read(end - start)


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace").rstrip("\r")


class Reader(Protocol):
    """How log files are read: this module's functions, or over SSH (hpclaunch/logs/remote.py)."""

    def iter_lines(self, path: Path, pattern: re.Pattern[bytes] | None = None) -> Iterator[bytes]: ...

    def tail_lines(self, path: Path, n: int, pattern: re.Pattern[bytes] | None = None) -> list[bytes]: ...


class LocalReader:
    iter_lines = staticmethod(iter_lines)
    tail_lines = staticmethod(tail_lines)


LOCAL = LocalReader()


def merged(files: list[LogFile], *, tail: int | None = None, pattern: re.Pattern[bytes] | None = None,
           reader: Reader = LOCAL) -> Iterator[Line]:
    """Lines of every file, restart by restart and rank by rank; with `tail`, the last `tail` lines of
    each rank (across its restarts, newest restart first until enough lines are found)."""
    iter_lines, tail_lines = reader.iter_lines, reader.tail_lines
    if tail is None:
        for lf in files:
            for raw in iter_lines(lf.path, pattern):
                yield Line(lf.rank, lf.restart, _decode(raw))
        return
    chosen: dict[tuple[int, int], list[bytes]] = {}
    by_rank: dict[int, list[LogFile]] = {}
    for lf in files:
        by_rank.setdefault(lf.rank, []).append(lf)
    for rank, rank_files in by_rank.items():
        need = tail
        for lf in sorted(rank_files, key=lambda f: f.restart, reverse=True):
            got = tail_lines(lf.path, need, pattern)
            chosen[(lf.restart, rank)] = got
            need -= len(got)
            if need <= 0:
                break
    for (restart, rank), lines in sorted(chosen.items()):
        for raw in lines:
            yield Line(rank, restart, _decode(raw))


def batch_lines(paths: list[Path], *, tail: int | None = None, pattern: re.Pattern[bytes] | None = None,
                reader: Reader = LOCAL) -> Iterator[Line]:
    """The batch output's own lines (hpclaunch, torchrun, slurmstepd), without the rank lines that
    rank_exec echoes there (they are in the rank logs already)."""
    rank_echo = re.compile(rb"^\[rank\d+\]: ")
    for p in paths:
        raws = reader.tail_lines(p, tail, pattern) if tail else reader.iter_lines(p, pattern)
        for raw in raws:
            if not rank_echo.match(raw):
                yield Line(None, -1, _decode(raw))
