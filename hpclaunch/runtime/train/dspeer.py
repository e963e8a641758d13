"""Recovery from node memory for DeepSpeed ZeRO-1 and ZeRO-2: a relaunch inside the allocation takes each rank's
own ZeRO partition back from its node's memory instead of the newest checkpoint, so a kill or a hang (the node
survives) recomputes no step. The torch engine's recovery from a peer (peer.py) is the model; this is its DeepSpeed
half.

Why each rank keeps its own partition, not the node one replica: under ZeRO-1/2 a rank's fp32 master weights and
optimizer state are a 1/N slice that no other rank holds, so there is no replica to take from another node. What
is replicated, the module's bf16/fp16/fp32 weights, need not be kept at all: after each optimizer step DeepSpeed
copies every rank's fp32 partition into the module's flat weights and all-gathers them (stage_1_and_2.py's
`step`), so the same all-gather after a reload (`update_lp_params`) gives the weights back exactly. Neither
DeepSpeed's own save_checkpoint into a node-memory folder (`checkpoint.use_node_local_storage`) nor
optimizer.state_dict()/load_state_dict is used: save_checkpoint pickles the whole state into new files at every
snapshot (its module file too), and ZeRO-1/2's load_checkpoint reads every data-parallel rank's optimizer file,
which a node does not hold; the live tensors copied into two slots made once (peerstore.py) cost one memcpy per
step on the CPU and an asynchronous device-to-host copy on a GPU.

While training (`take`, after each optimizer step, every train.peer_snapshot_every): every rank copies its own
partition (engine.replica_tensors: its fp32 master partition per parameter group, the optimizer's state for it,
the module's buffers) into its own slot folder in node memory, beside its RNG states and the small rest (the data
position, the scheduler, the loss scaler, DeepSpeed's step counters, and whose partition it is: rank and world
size). The folder is keyed by the global rank (`<node>.rank<R>`, rank_folder), so a rank placed on another node at a
relaunch (a spare replacing a lost node) finds nothing there and never reads another rank's partition; the
partition's rank, world size and layout are checked before it is loaded. On a CUDA device the copy runs on a side
stream and the next optimizer update waits for it on the device (DeepSpeed updates inside its `step`, so the
engine calls the wait there: `pre_update`), with no host sync.

At the (re)start (`restore`, a collective of every rank): one all-gather of the step each rank holds for its own
partition and rank 0's newest checkpoint step. When every rank holds the same step S, newer than that checkpoint,
each loads its own partition from its node's memory and the module's weights are all-gathered: 0 steps recomputed.
A lost node (its ranks' partitions gone: no node keeps a buddy copy here) or any rank missing S: every rank loads
the checkpoint, as before; rank 0's log and the resume record (`peer_missed`) say which ranks missed it and why.
Rank 0 records `source: peer` (node memory, not disk; state/recoveries.py) with `zero_partitions` set. ZeRO-3
(parameters partitioned too) and data parallelism 1 stay on the checkpoint path (peer.unsupported says so in the
log). A run that ends removes its ranks' folders; other jobs' stale ones are swept (peerstore.sweep_stale).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hpclaunch.runtime.train.peer import Snapshots, gather_steps, set_rng
from hpclaunch.runtime.train.peerstore import Held, Layout

if TYPE_CHECKING:
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.engine import DeepSpeedEngine


def rank_folder(node: Path, rank: int) -> Path:
    """Rank `rank`'s folder of partitions on this node (beside the node folders of the torch engine's snapshots)."""
    return node.with_name(f"{node.name}.rank{rank}")


class PartitionSnapshots(Snapshots):
    """This rank's own ZeRO-1/2 partition in its node's memory (see the module's docstring)."""

    every_rank_writes = True

    def __init__(self, d: Dist, engine: DeepSpeedEngine, every: int, folder: Path, run_dir: Path,
                 log: Any = print) -> None:
        super().__init__(d, engine, every, folder, run_dir, log)  # type: ignore[arg-type]
        self.ds = engine
        engine.pre_update = super().before_update  # the base's wait, called by the engine where DeepSpeed updates

    @staticmethod
    def folder_of(node: Path, d: Dist) -> Path:
        return rank_folder(node, d.rank)

    def before_update(self) -> None:
        """Nothing here: DeepSpeed's update runs inside the last micro-step, where the engine waits (pre_update)."""

    def _own(self) -> tuple[Held | None, str]:
        """This rank's partition held in its node's memory, checked; else None and why not."""
        host = socket.gethostname().split(".")[0]
        held = self.store.held()
        if held is None:
            return None, f"none in {host}'s memory"
        whose = (held.meta.get("rank"), held.meta.get("world_size"))
        if whose != (self.d.rank, self.d.world_size):
            mine = (self.d.rank, self.d.world_size)
            return None, f"{host} holds rank {whose[0]} of {whose[1]}'s, not rank {mine[0]} of {mine[1]}'s"
        self.ds.replica_prepare([(e.name, e.dtype, e.shape) for e in held.layout.entries])
        if held.layout.id != Layout.of(self.ds.replica_tensors()).id:
            why = f"the partition {host} holds does not match this rank's state (another ZeRO config?)"
            self.log(f"hpclaunch: rank {self.d.rank}: its partition in node memory is not loaded: {why}")
            return None, why
        return held, ""

    def restore(self, disk_step: int, seed: int) -> dict[str, Any] | None:
        """The client state (step, data position) with every rank's own partition loaded from its node's memory,
        when every rank holds the same step, newer than the checkpoint at `disk_step` (0: none); None: load the
        checkpoint (every rank agrees; `missed` says why where some rank held a newer step)."""
        d, t0 = self.d, time.perf_counter()
        held, why = self._own()
        steps, disk = gather_steps(d, held.step if held else -1, disk_step)
        newest = max(steps)
        if newest <= disk:
            return None
        short = [r for r, s in enumerate(steps) if s != newest]
        if short:
            reasons: list[Any] = [None] * d.world_size
            dist.all_gather_object(reasons, why or f"it holds step {steps[d.rank]}")
            self.missed = "; ".join(f"rank {r}: {reasons[r]}" for r in short)
            if d.is_main:
                self.log(f"hpclaunch: no recovery from node memory: not every rank holds its ZeRO partition of step "
                         f"{newest} ({self.missed}): loading the newest checkpoint (step {disk})")
            return None
        assert held is not None
        live = [t for _, t in self.ds.replica_tensors()]
        with torch.no_grad():  # the fp32 partitions are the inner optimizer's leaf parameters
            for dst, value in zip(live, self.store.read(held), strict=True):
                dst.copy_(value)
        self.ds.replica_load_meta(held.meta)  # the module's weights: every rank's partition all-gathered
        rng = self.store.rng_at(newest).get(d.rank)
        set_rng(d, rng, seed, newest)
        tally = torch.tensor([held.layout.nbytes, int(rng is None)], dtype=torch.int64, device=d.device)
        every = [torch.zeros_like(tally) for _ in range(d.world_size)]
        dist.all_gather(every, tally)
        loaded, fresh = sum(int(x[0]) for x in every), [r for r, x in enumerate(every) if int(x[1])]
        if d.is_main:
            took = self._resumed(t0, {"step": newest, "zero_partitions": d.world_size, "checkpoint_step": disk,
                                      "bytes": loaded, "fresh_rng_ranks": fresh})
            self.log(f"hpclaunch: resumed from node memory: step {newest}, each of the {d.world_size} ranks from its "
                     f"own ZeRO-{self.ds.zero_stage} partition ({loaded / 2**20:.1f} MiB in all, {took:.2f} s; the "
                     f"newest checkpoint is step {disk})")
        return dict(held.meta["client"], step=newest)
