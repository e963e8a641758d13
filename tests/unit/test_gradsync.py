"""hpclaunch's hook-based gradient averaging (hpclaunch/runtime/train/gradsync.py) gives DDP's gradients: two real
gloo ranks with different data, after one backward, after an accumulation under no_sync, with a parameter that got
no gradient, and with weights that started different (rank 0's are broadcast)."""

from __future__ import annotations

import os
import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from hpclaunch.runtime.train.gradsync import GradSync, buckets_of  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 300), torch.nn.Tanh(), torch.nn.Linear(300, 16))
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight  # tied, as GPT-2's
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.emb(ids))).logsumexp(-1).mean()


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(100 + rank)  # different initial weights: both must end with rank 0's
    ours, theirs = Net(), Net()
    torch.manual_seed(0)
    ref = Net()
    if rank == 0:
        ours.load_state_dict(ref.state_dict())
        theirs.load_state_dict(ref.state_dict())
    sync = GradSync(ours)
    ddp = torch.nn.parallel.DistributedDataParallel(theirs, find_unused_parameters=True)
    torch.manual_seed(1 + rank)  # each rank its own data
    batches = [torch.randint(0, 50, (4, 7)) for _ in range(3)]
    results = {}
    # 1: one backward
    ours(batches[0]).backward()
    sync.wait()
    ddp(batches[0]).backward()
    results["one"] = (_grads(ours), _grads(theirs))
    # 2: three micro-batches, the first two without the all-reduce
    for m in (ours, theirs):
        m.zero_grad(set_to_none=False)
    for i, ids in enumerate(batches):
        with (sync.no_sync() if i < 2 else torch.enable_grad()):
            ours(ids).backward()
        with (ddp.no_sync() if i < 2 else torch.enable_grad()):
            ddp(ids).backward()
    sync.wait()
    results["accumulated"] = (_grads(ours), _grads(theirs))
    results["weights"] = ({n: p.detach().clone() for n, p in ours.named_parameters()},
                          {n: p.detach().clone() for n, p in theirs.named_parameters()})
    torch.save(results, f"{out}/rank-{rank}.pt")
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gradients_and_weights_are_ddps_on_two_gloo_ranks(tmp_path):
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank-{r}.pt") for r in (0, 1)]
    for case in ("one", "accumulated", "weights"):
        for rank in ranks:
            ours, theirs = rank[case]
            assert ours.keys() == theirs.keys() and ours
            for name in ours:
                assert torch.allclose(ours[name], theirs[name], rtol=1e-6, atol=1e-7), (case, name)
        for name in ranks[0][case][0]:  # the replicas agree
            assert torch.equal(ranks[0][case][0][name], ranks[1][case][0][name]), (case, name)


def test_buckets_take_the_parameters_in_reverse_order():
    params = [torch.zeros(n) for n in (10, 300_000, 20, 5_000_000, 7)]
    buckets = buckets_of(params, first=1_000_000, cap=4_000_000)
    assert [[p.numel() for p in b] for b in buckets] == [[7, 5_000_000], [20, 300_000, 10]]
