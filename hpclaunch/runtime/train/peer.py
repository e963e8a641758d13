"""Recovery from a peer: a relaunch inside the allocation takes the training state from a surviving data-parallel
replica's in-memory snapshot (peerstore.py) instead of the newest checkpoint, so a kill, a hang or a lost node
recomputes no step.

While training (`Snapshots.take`, after each optimizer step, every train.peer_snapshot_every): each node's local
rank 0 copies the replica's tensors into its node's snapshot slot, and every rank leaves its RNG states there.
On the CPU the copy is synchronous; on a CUDA device it runs on a side stream into page-locked node memory, the
next optimizer step waits for it on the device (no host sync), and a thread moves the marker once it is done.

At the (re)start (`restore`, a collective of every rank, before the checkpoint is loaded): one all-gather says
which step each rank's node holds (-1: none) and rank 0's newest checkpoint step; when the newest held step S is
newer than that checkpoint, the lowest rank holding it loads it from its node's memory and broadcasts the state to
every rank (a replacement node holds nothing: the lost-node case), in buckets; each rank takes its own RNG states
from whichever node kept them at S, and a rank whose states went with a lost node is seeded afresh from (seed,
rank, S) (said in the log: with dropout its draws differ from an uninterrupted run's from there). Else the
checkpoint is loaded, as without snapshots: data parallelism 1, tensor parallelism, DeepSpeed ZeRO-3 (or without
ZeRO), every replica lost. DeepSpeed ZeRO-1/2 keeps no replica but each rank's own partition, loaded back by that
rank (dspeer.py, PartitionSnapshots: the same slots and copies, its own restore).

Rank 0 records where the state came from in RUN_DIR/progress/resumed.restart-<N>.json (state/recoveries.py), and
copies the metric lines up to S that it had not written yet (killed within its flush interval) from another rank's.
A run that ends (done, or stopped to be requeued) removes its nodes' snapshots.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hpclaunch.runtime.train import checkpoint
from hpclaunch.runtime.train.peerstore import Layout, NodeStore, node_folder, sweep_stale
from hpclaunch.state import recoveries
from hpclaunch.state.runfiles import ENV_RESTART, RunFiles, read_json_lines

if TYPE_CHECKING:
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.engine import TorchEngine
    from hpclaunch.runtime.train.job import Job

BUCKET_BYTES = 64 << 20  # the broadcast's flat buffers
ROOM_SHARE = 0.5  # the two slots may take at most this share of the node-local memory free when they are made


def unsupported(job: Job, d: Dist, engine: object) -> str | None:
    """Why this run takes no snapshots (None: it does)."""
    if job.train.peer_snapshot_every == 0:
        return "train.peer_snapshot_every is 0"
    if job.spec.restarts.max == 0:
        return "restarts.max is 0 (no relaunch inside the allocation)"
    stage = getattr(engine, "zero_stage", None)  # DeepSpeed: each rank keeps its own ZeRO-1/2 partition (dspeer.py)
    if stage == 3:
        return ("DeepSpeed ZeRO-3 partitions the parameters too, and no node keeps another's partition: it recovers "
                "from its checkpoints")
    if stage is not None and stage not in (1, 2):
        return f"DeepSpeed ZeRO stage {stage}: recovery from node memory covers ZeRO-1 and 2 only"
    if d.tensor_parallel > 1:
        return "tensor parallelism: a rank's shard has no replica on another node here"
    if d.dp_size < 2:
        return "data parallelism 1: no peer holds the state"
    return None


class Snapshots:
    """This rank's part of the node's snapshots: the tensors (local rank 0) and its own RNG states."""

    every_rank_writes = False  # True: each rank keeps its own tensors (dspeer.PartitionSnapshots), not the node's

    def __init__(self, d: Dist, engine: TorchEngine, every: int, folder: Path, run_dir: Path,
                 log: Any = print) -> None:
        self.d, self.engine, self.every, self.log = d, engine, every, log
        self.run = RunFiles(run_dir)
        self.store = NodeStore(folder)
        self.writer = self.every_rank_writes or d.local_rank == 0
        # the node's writers share its memory: each may plan on its part of the free room
        self.sharers = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) if self.every_rank_writes else 1
        self.live: list[torch.Tensor] = []
        self.count = -1  # optimizer states when the layout was made (a change makes it again)
        self.off: str | None = None  # why this node stopped taking them
        self.async_copy = self.writer and d.accelerator == "cuda"
        self.event: Any = None  # the last copy's event (CUDA)
        self.idle = threading.Event()
        self.idle.set()
        self.jobs: queue.Queue[tuple[Any, int, int, dict[str, Any]]] = queue.Queue()
        self.copy_s = 0.0  # host seconds spent in take() (the cost per step, measured)
        self.taken = 0
        self.missed: str | None = None  # why a relaunch that found snapshots loads the checkpoint (the record says)
        if d.local_rank == 0:
            for folder_gone in sweep_stale(folder.parent):
                log(f"hpclaunch: removed a stale peer snapshot: {folder_gone}")

    @classmethod
    def for_run(cls, job: Job, d: Dist, engine: object, log: Any = print) -> Snapshots | None:
        why = unsupported(job, d, engine)
        if why is not None:
            if d.is_main and job.train.peer_snapshot_every and job.spec.restarts.max:
                log(f"hpclaunch: no recovery from a peer ({why}): a relaunch loads the newest checkpoint")
            return None
        folder = cls.folder_of(node_folder(os.environ.get("HPCLAUNCH_JOB_ID") or "manual", job.run_dir), d)
        return cls(d, engine, job.train.peer_snapshot_every, folder, job.run_dir, log)  # type: ignore[arg-type]

    @staticmethod
    def folder_of(node: Path, d: Dist) -> Path:
        """This rank's snapshot folder, given its node's."""
        return node

    # --- while training
    def before_update(self) -> None:
        """Before the optimizer changes the tensors: the device waits for the last copy from them (no host sync)."""
        if self.event is not None:
            torch.cuda.current_stream(self.d.device).wait_event(self.event)
            self.event = None

    def take(self, step: int, client: dict[str, Any]) -> None:
        """After optimizer step `step` (client: the data position): the node's copy and this rank's RNG states."""
        if self.off or step % self.every:
            return
        t0 = time.perf_counter()
        k = (step // self.every) % 2
        try:
            self.store.write_rng(self.d.rank, k, step, checkpoint.rng_state(self.d))
            if self.writer:
                self._copy(step, {"client": client, **self.engine.replica_meta()})
        except OSError as exc:
            self._stop(f"writing it failed: {exc}")
        self.copy_s += time.perf_counter() - t0
        self.taken += 1

    def _copy(self, step: int, meta: dict[str, Any]) -> None:
        self.idle.wait()  # the last copy's marker is written: the slot it does not name is free
        if len(self.engine.optimizer.state) != self.count:
            if not self._plan():
                return
        k = self.store.next_slot()
        views = self.store.layout.views(self.store.buffers[k])  # type: ignore[union-attr]  # planned above
        if not self.async_copy:
            for dst, src in zip(views, self.live, strict=True):
                dst.copy_(src)
            self.store.commit(k, step, meta)
            return
        stream = self._stream()
        stream.wait_stream(torch.cuda.current_stream(self.d.device))
        with torch.cuda.stream(stream):
            for dst, src in zip(views, self.live, strict=True):
                dst.copy_(src, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record(stream)
        self.idle.clear()
        self.jobs.put((self.event, k, step, meta))

    def _plan(self) -> bool:
        """(Re)make the node's slots for the replica's tensors, if node-local memory has room for them."""
        named = self.engine.replica_tensors()
        layout = Layout.of(named)
        free = _free_bytes(self.store.folder) // self.sharers
        if 2 * layout.nbytes > ROOM_SHARE * free:
            self._stop(f"two copies of the state take {2 * layout.nbytes / 2**30:.2f} GiB, more than "
                       f"{ROOM_SHARE:.0%} of the {free / 2**30:.2f} GiB free in node-local memory"
                       + (f" for each of its {self.sharers} ranks" if self.sharers > 1 else ""))
            return False
        try:
            self.store.allocate(layout)
        except OSError as exc:
            self._stop(f"no room in node-local memory: {exc}")
            return False
        self.live, self.count = [t for _, t in named], len(self.engine.optimizer.state)
        if self.async_copy:
            self._pin()
        return True

    def _pin(self) -> None:
        """Page-lock the slots so that the copies from the device are asynchronous (else they block the host)."""
        cudart = torch.cuda.cudart()
        for buf in self.store.buffers:
            if int(cudart.cudaHostRegister(buf.data_ptr(), buf.numel(), 0)) != 0:
                self.log("hpclaunch: peer snapshots: node memory could not be page-locked: copies block the host")
                return

    def _stream(self) -> Any:
        if not hasattr(self, "_side"):
            self._side = torch.cuda.Stream(self.d.device)
            threading.Thread(target=self._finish, name="hpclaunch-peer-snapshot", daemon=True).start()
        return self._side

    def _finish(self) -> None:
        """The CUDA copies' thread: once a copy is done on the device, its slot becomes the complete one."""
        while True:
            event, k, step, meta = self.jobs.get()
            try:
                event.synchronize()
                self.store.commit(k, step, meta)
            except (OSError, RuntimeError) as exc:
                self.off = f"writing it failed: {exc}"
            finally:
                self.idle.set()

    def _stop(self, why: str) -> None:
        self.off = why
        self.log(f"hpclaunch: peer snapshots off on this node ({why}): a relaunch may need the checkpoint")

    def close(self) -> None:
        """The run ended or stopped on its own: this node's snapshots go (node-local memory is precious)."""
        self.idle.wait()
        self.off = "closed"
        if self.writer:
            self.store.remove()
        else:
            for k in (0, 1):
                self.store.rng_file(self.d.rank, k).unlink(missing_ok=True)

    # --- at the (re)start
    def restore(self, disk_step: int, seed: int) -> dict[str, Any] | None:
        """The client state (step, data position) from a peer's snapshot newer than the checkpoint at
        `disk_step` (0: none), loaded into the engine on every rank; None: load the checkpoint (every rank agrees)."""
        d, t0 = self.d, time.perf_counter()
        held = self.store.held()
        steps, disk = gather_steps(d, held.step if held else -1, disk_step)
        newest = max(steps)
        if newest <= disk:
            return None
        src = steps.index(newest)
        box: list[Any] = [None]
        if d.rank == src:
            assert held is not None
            self.engine.replica_prepare([(e.name, e.dtype, e.shape) for e in held.layout.entries])
            live = self._checked(held.layout)
            for dst, value in zip(live, self.store.read(held), strict=True):
                dst.copy_(value)
            box = [(held.layout, held.meta, {i: t.clone() for i, t in enumerate(live) if t.device != d.device})]
        dist.broadcast_object_list(box, src=src, device=d.device)
        layout, meta, host = box[0]
        if d.rank != src:
            self.engine.replica_prepare([(e.name, e.dtype, e.shape) for e in layout.entries])
            live = self._checked(layout)
            for i, value in host.items():
                live[i].copy_(value)
        sent = _broadcast([t for t in live if t.device == d.device], src)
        self.engine.replica_load_meta(meta)
        fresh = self._rng(newest, seed)
        client = dict(meta["client"], step=newest)
        if d.is_main:
            took = self._resumed(t0, {"step": newest, "from_rank": src, "checkpoint_step": disk, "bytes": sent,
                                      "fresh_rng_ranks": fresh})
            self.log(f"hpclaunch: resumed from a peer: step {newest} from rank {src}'s node memory "
                     f"({sent / 2**20:.1f} MiB broadcast in {took:.2f} s; the newest checkpoint is step {disk})"
                     + (f"; ranks {fresh} seeded afresh (their RNG states went with their node)" if fresh else ""))
        return client

    def _resumed(self, t0: float, rec: dict[str, Any]) -> float:
        """Rank 0, resumed from node memory at rec["step"]: rank 0's missing metric lines copied, the record
        written (source peer); the seconds since t0."""
        took = time.perf_counter() - t0
        copied = fill_metrics(self.run, rec["step"], self.d.world_size)
        restart = int(os.environ.get(ENV_RESTART, "0") or 0)
        record_resume(self.run, restart, {**rec, "source": "peer", "seconds": round(took, 3),
                                          "metrics_copied": copied})
        return took

    def _checked(self, layout: Layout) -> list[torch.Tensor]:
        named = self.engine.replica_tensors()
        got = [(n, t.dtype, tuple(t.shape)) for n, t in named]
        want = [(e.name, e.dtype, e.shape) for e in layout.entries]
        if got != want:  # the same model on every rank: never expected; said plainly if it happens
            raise RuntimeError(f"peer snapshot's layout ({len(want)} tensors) does not match this rank's state "
                               f"({len(got)} tensors): set train.peer_snapshot_every=0 and report it")
        return [t for _, t in named]

    def _rng(self, step: int, seed: int) -> list[int]:
        """Each rank's own RNG states at `step` from any node that kept them; the ranks without any: seeded afresh."""
        found: list[Any] = [None] * self.d.world_size
        dist.all_gather_object(found, self.store.rng_at(step))
        merged: dict[int, Any] = {}
        for part in found:
            merged.update(part or {})
        set_rng(self.d, merged.get(self.d.rank), seed, step)
        return [r for r in range(self.d.world_size) if r not in merged]


def gather_steps(d: Dist, held: int, disk_step: int) -> tuple[list[int], int]:
    """One all-gather: the step each rank's node memory holds (-1: none), and rank 0's newest checkpoint step."""
    mine = torch.tensor([held, disk_step if d.is_main else -1], dtype=torch.int64, device=d.device)
    every = [torch.zeros_like(mine) for _ in range(d.world_size)]
    dist.all_gather(every, mine)
    return [int(x[0]) for x in every], int(every[0][1])


def set_rng(d: Dist, state: dict[str, Any] | None, seed: int, step: int) -> None:
    """This rank's RNG states as kept at `step`; none kept (they went with a lost node): seeded afresh from
    (seed, rank, step)."""
    if state is not None:
        checkpoint.set_rng_state(state, d)
        return
    from hpclaunch.runtime.train.distributed import seed_everything

    seed_everything(int(hashlib.sha256(f"{seed}:{d.rank}:{step}".encode()).hexdigest()[:8], 16))


def _broadcast(tensors: list[torch.Tensor], src: int) -> int:
    """Broadcast the tensors from `src` in flat buffers of one dtype (at most BUCKET_BYTES each); the bytes sent."""
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    total, size = 0, 0
    bucket: list[torch.Tensor] = []
    buckets: list[list[torch.Tensor]] = []
    for t in tensors:
        if bucket and (t.dtype != bucket[0].dtype or size + t.nbytes > BUCKET_BYTES):
            buckets.append(bucket)
            bucket, size = [], 0
        bucket.append(t)
        size += t.nbytes
    if bucket:
        buckets.append(bucket)
    for group in buckets:
        if dist.get_rank() == src:
            flat = _flatten_dense_tensors(group)
        else:
            flat = torch.empty(sum(t.numel() for t in group), dtype=group[0].dtype, device=group[0].device)
        dist.broadcast(flat, src)
        if dist.get_rank() != src:
            for t, value in zip(group, _unflatten_dense_tensors(flat, group), strict=True):
                t.copy_(value)
        total += flat.nbytes
    return total


def _free_bytes(folder: Path) -> int:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def record_resume(run: RunFiles, restart: int, rec: dict[str, Any]) -> None:
    """Rank 0: where this restart's state came from (recoveries.py reads it back)."""
    path = recoveries.resumed_file(run, restart)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**rec, "restart": restart, "at": round(time.time(), 3)}) + "\n")


def fill_metrics(run: RunFiles, upto: int, world: int) -> int:
    """Rank 0's train and eval lines up to step `upto` that it had not written when it was stopped (it appends
    every few seconds): copied from the lowest other rank that has them (the loss and rates are the whole job's;
    each copy says `copied_from`). Returns how many."""
    have = {(r.get("kind"), r.get("step")) for r in read_json_lines(run.metrics_file(0))}
    missing: list[dict[str, Any]] = []
    for rank in range(1, world):
        lines = [r for r in read_json_lines(run.metrics_file(rank))
                 if r.get("kind") in ("train", "eval") and isinstance(r.get("step"), int) and r["step"] <= upto]
        for rec in lines:
            if (key := (rec["kind"], rec["step"])) not in have:
                have.add(key)
                missing.append({**rec, "rank": 0, "copied_from": rank})
        if lines:
            break  # the lowest rank with lines is enough: every rank writes the same steps
    if missing:
        missing.sort(key=lambda r: (r["step"], r["kind"]))
        run.metrics.mkdir(parents=True, exist_ok=True)
        with open(run.metrics_file(0), "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in missing))
    return len(missing)
