"""Data-parallel gradient averaging for a job that does not compile its model, without DistributedDataParallel.

Why: constructing torch's DDP imports torch._dynamo (DDP asks it for its optimizer mode) and, through FSDP,
DTensor and sympy — about as much CPU as importing torch itself, on every rank of every node, before the first
step (docs/benchmarks.md#rank-start-up). A compiled model imports torch._dynamo anyway and keeps DDP (its
DDPOptimizer splits the graph at the buckets); `train.grad_sync` chooses (engine.py).

What it does is DDP's default: the parameters broadcast from rank 0 at the start; gradients in buckets of
parameters taken in reverse order (the order backward produces them; a small first bucket, then 25 MiB), each
bucket divided by the world size and all-reduced asynchronously as soon as its last gradient is accumulated, so
the communication overlaps the rest of backward; launched in bucket order on every rank (collectives must be
issued in the same order everywhere); `no_sync()` for the micro-steps before the last of an accumulation;
`wait()` before the optimizer reads the gradients. A parameter that got no gradient counts as zero in the average
and keeps no gradient where no rank gave it one (as DDP with find_unused_parameters; here it costs nothing unless
it happens).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist

FIRST_BUCKET_BYTES = 1 << 20
BUCKET_BYTES = 25 << 20


def buckets_of(params: Sequence[torch.Tensor], first: int = FIRST_BUCKET_BYTES, cap: int = BUCKET_BYTES
               ) -> list[list[torch.Tensor]]:
    """`params` in reverse order cut into buckets of at least `first`, then `cap` bytes (the last may be smaller)."""
    out: list[list[torch.Tensor]] = []
    current: list[torch.Tensor] = []
    size, limit = 0, first
    for p in reversed(params):
        current.append(p)
        size += p.numel() * p.element_size()
        if size >= limit:
            out.append(current)
            current, size, limit = [], 0, cap
    if current:
        out.append(current)
    return out


class GradSync:
    def __init__(self, module: torch.nn.Module) -> None:
        self.world = dist.get_world_size()
        with torch.no_grad():  # every replica starts from rank 0's weights, as DDP makes sure
            for t in [*module.parameters(), *module.buffers()]:
                dist.broadcast(t, 0)
        params = [p for p in module.parameters() if p.requires_grad]  # a tied weight once
        self.buckets = buckets_of(params)
        self._bucket = {id(p): i for i, bucket in enumerate(self.buckets) for p in bucket}
        self._ready = [0] * len(self.buckets)
        self._flying: list[tuple[dist.Work, torch.Tensor]] = []  # launched buckets, in bucket order
        self._enabled = True
        for p in params:
            p.register_post_accumulate_grad_hook(self._accumulated)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradients accumulate locally (the micro-steps before the last of an optimizer step)."""
        self._enabled = False
        try:
            yield
        finally:
            self._enabled = True

    def _accumulated(self, p: torch.Tensor) -> None:
        if not self._enabled:
            return
        i = self._bucket[id(p)]
        self._ready[i] += 1
        while len(self._flying) < len(self.buckets) and self._full(len(self._flying)):
            self._launch(len(self._flying))

    def _full(self, i: int) -> bool:
        return self._ready[i] == len(self.buckets[i])

    def _launch(self, i: int) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.buckets[i]]
        flat = torch.cat([g.reshape(-1) for g in grads]).div_(self.world)
        work = dist.all_reduce(flat, async_op=True)
        assert work is not None  # async_op=True
        self._flying.append((work, flat))

    def wait(self) -> None:
        """The averaged gradients in every parameter's .grad (buckets not launched yet, whose parameters got no
        gradient in this backward, are launched now, in order)."""
        for i in range(len(self._flying), len(self.buckets)):
            self._launch(i)
        for (work, flat), bucket in zip(self._flying, self.buckets, strict=True):
            work.wait()
            offset = 0
            for p in bucket:
                n = p.numel()
                mean = flat[offset:offset + n].view_as(p)
                if p.grad is not None:
                    p.grad.copy_(mean)
                elif mean.any():  # unused here, used by a peer: DDP gives it the average too (a rare host sync)
                    p.grad = mean.clone()
                offset += n
        self._flying.clear()
        self._ready = [0] * len(self.buckets)
