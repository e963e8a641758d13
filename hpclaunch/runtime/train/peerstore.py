"""A node's in-memory snapshot of a data-parallel replica's training state: what recovery from a peer (peer.py)
reads after a relaunch instead of the disk checkpoint.

Data-parallel replicas hold the same model and optimizer state, so one copy per node is enough: the node's local
rank 0 copies its tensors after each optimizer step (every `train.peer_snapshot_every`) into buffers made once,
and every rank of the node leaves its own RNG states beside them. The folder lives in node-local memory:

    <base>/peer-<job>-<run>/<host>/         base: /dev/shm/hpclaunch-<uid> (else the temporary folder); <job>: the
                                            job id; <run>: a hash of the run directory (a folder is never read by
                                            another job or run); <host>: the node (nodes that share /dev/shm,
                                            as the dev cluster's, stay apart)
        layout.pkl                          the tensors' names, dtypes, shapes and byte offsets in a slot, and its id
        slot0.bin, slot1.bin                the tensors' bytes: preallocated (posix_fallocate: a full /dev/shm
                                            fails here, never later as a SIGBUS), mapped with torch.from_file
        slot0.meta, slot1.meta              the small rest of the step the slot holds (step, data position,
                                            scheduler, optimizer groups), pickled, replaced whole
        marker                              {"slot", "step", "layout"}: the complete slot, replaced whole (rename)
                                            once the slot's copy is done
        rng-rank-<R>.slot<K>                rank R's RNG states at the step of slot K, replaced whole

Two slots alternate: a step is copied into the slot the marker does not name, and the marker moves to it only
after the copy and its meta are complete; a rank killed mid-copy leaves the marker on the other slot, whose step
is intact. Standard library and torch.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ALIGN = 64  # bytes: each tensor's offset in a slot
STALE_S = 6 * 3600.0  # another job's folder untouched this long is removed when a store opens on the node
_LAYOUT, _MARKER = "layout.pkl", "marker"


def base() -> Path:
    """Node-local memory where there is some (/dev/shm), else the node's temporary folder."""
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return root / f"hpclaunch-{os.getuid()}"


def job_folder(job: str, run_dir: Path) -> Path:
    """The job's folder of snapshots on any node: named by the job id and the run directory."""
    run = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in job) or "manual"
    return base() / f"peer-{safe}-{run}"


def node_folder(job: str, run_dir: Path) -> Path:
    return job_folder(job, run_dir) / socket.gethostname().split(".")[0]


def sweep_stale(keep: Path, now: float | None = None, stale_s: float = STALE_S) -> list[Path]:
    """Remove the snapshot folders of other jobs on this node untouched for `stale_s` (a job that ended without
    removing its own: a launch that failed and was not relaunched); returns them."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        folders = [p for p in keep.parent.iterdir() if p.name.startswith("peer-") and p != keep]
    except OSError:
        return removed
    for folder in folders:
        try:
            newest = max((p.stat().st_mtime for p in folder.rglob("*")), default=folder.stat().st_mtime)
        except OSError:
            continue
        if now - newest > stale_s:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@dataclass(frozen=True)
class Entry:
    """One tensor's place in a slot."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        return _numel(self.shape) * torch.empty((), dtype=self.dtype).element_size()


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@dataclass(frozen=True)
class Layout:
    entries: tuple[Entry, ...]
    nbytes: int

    @classmethod
    def of(cls, tensors: list[tuple[str, torch.Tensor]]) -> Layout:
        entries, offset = [], 0
        for name, t in tensors:
            e = Entry(name, t.dtype, tuple(t.shape), offset)
            entries.append(e)
            offset += -(-e.nbytes // ALIGN) * ALIGN
        return cls(tuple(entries), offset)

    @property
    def id(self) -> str:
        text = repr([(e.name, str(e.dtype), e.shape) for e in self.entries])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def views(self, buf: torch.Tensor) -> list[torch.Tensor]:
        """Each tensor's view into a slot's bytes."""
        return [buf[e.offset:e.offset + e.nbytes].view(e.dtype).view(e.shape) for e in self.entries]


@dataclass(frozen=True)
class Held:
    """A node's complete snapshot, as read back: its step, slot, layout and small state."""

    step: int
    slot: int
    layout: Layout
    meta: dict[str, Any]


def _replace(path: Path, data: bytes) -> None:
    """Write a small file whole: a reader sees the old or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _load(path: Path) -> Any:
    try:
        return pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError):
        return None


class NodeStore:
    """The snapshot folder of one node (see the module's docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.layout: Layout | None = None
        self.buffers: list[torch.Tensor] = []
        self.slot = -1  # the slot the marker names (-1: none yet)

    def slot_file(self, k: int) -> Path:
        return self.folder / f"slot{k}.bin"

    def rng_file(self, rank: int, k: int) -> Path:
        return self.folder / f"rng-rank-{rank}.slot{k}"

    # --- writing (the node's local rank 0; every rank's own RNG)
    def allocate(self, layout: Layout) -> None:
        """Make the two slots for `layout`, or map those of the same layout that the node holds (after a relaunch:
        the complete one stays complete while the next step is copied into the other); before new slots are
        made the marker goes (no slot of another layout stays complete). OSError (ENOSPC) when node-local memory
        has no room for them."""
        self.folder.mkdir(parents=True, exist_ok=True)
        held = self.held()
        keep = held is not None and held.layout.id == layout.id
        if not keep:
            (self.folder / _MARKER).unlink(missing_ok=True)
        self.layout, self.slot, self.buffers = None, -1, []
        size = max(layout.nbytes, 1)
        for k in (0, 1):
            path = self.slot_file(k)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | (0 if keep else os.O_TRUNC), 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError:
                os.close(fd)
                self.remove()
                raise
            os.close(fd)
            self.buffers.append(torch.from_file(str(path), shared=True, size=size, dtype=torch.uint8))
        if not keep:
            _replace(self.folder / _LAYOUT, pickle.dumps(layout))
        self.layout, self.slot = layout, held.slot if keep and held is not None else -1

    def next_slot(self) -> int:
        """The slot to copy the next step into: the one the marker does not name."""
        return 1 - self.slot if self.slot >= 0 else 0

    def commit(self, k: int, step: int, meta: dict[str, Any]) -> None:
        """Slot k's copy of `step` is complete: its meta, then the marker names it."""
        assert self.layout is not None
        _replace(self.folder / f"slot{k}.meta", pickle.dumps({**meta, "step": step}))
        _replace(self.folder / _MARKER, pickle.dumps({"slot": k, "step": step, "layout": self.layout.id}))
        self.slot = k

    def write_rng(self, rank: int, k: int, step: int, rng: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        _replace(self.rng_file(rank, k), pickle.dumps({"step": step, "rank": rank, "rng": rng}))

    def remove(self) -> None:
        """The node's snapshot goes (and the job's folder with it once no node's is left there)."""
        self.buffers, self.layout, self.slot = [], None, -1
        shutil.rmtree(self.folder, ignore_errors=True)
        try:
            self.folder.parent.rmdir()
        except OSError:
            pass

    # --- reading back (after a relaunch)
    def held(self) -> Held | None:
        """The complete snapshot on this node, or None (no folder, no marker, or files that do not agree)."""
        marker, layout = _load(self.folder / _MARKER), _load(self.folder / _LAYOUT)
        if not isinstance(marker, dict) or not isinstance(layout, Layout) or marker.get("layout") != layout.id:
            return None
        k = marker.get("slot")
        meta = _load(self.folder / f"slot{k}.meta")
        if k not in (0, 1) or not isinstance(meta, dict) or meta.get("step") != marker.get("step"):
            return None
        try:
            if self.slot_file(k).stat().st_size < layout.nbytes:
                return None
        except OSError:
            return None
        return Held(int(marker["step"]), k, layout, meta)

    def read(self, held: Held) -> list[torch.Tensor]:
        """The tensors of a held snapshot: views into its slot, mapped read-only (copy them before training)."""
        size = max(held.layout.nbytes, 1)
        buf = torch.from_file(str(self.slot_file(held.slot)), shared=False, size=size, dtype=torch.uint8)
        return held.layout.views(buf)

    def rng_at(self, step: int) -> dict[int, dict[str, Any]]:
        """rank -> RNG states, for every rank that left them on this node at `step`."""
        out: dict[int, dict[str, Any]] = {}
        try:
            names = [p for p in self.folder.iterdir() if p.name.startswith("rng-rank-")]
        except OSError:
            return out
        for path in names:
            rec = _load(path)
            if isinstance(rec, dict) and rec.get("step") == step and isinstance(rec.get("rank"), int):
                out[rec["rank"]] = rec["rng"]
        return out
