"""Recovery from a peer (hpclaunch/runtime/train/peer.py, peerstore.py): the node's snapshot store (two slots, the
marker, a copy killed half-way, a folder per job and run), and two real gloo ranks that train, lose one node's
snapshot, restart fresh and go on from the other's with the parameters of an uninterrupted run."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from hpclaunch.runtime.train import peerstore  # noqa: E402
from hpclaunch.runtime.train.peerstore import Layout, NodeStore  # noqa: E402


def _tensors(value: float) -> list[tuple[str, torch.Tensor]]:
    return [("model/w", torch.full((3, 5), value)), ("model/b", torch.full((7,), value, dtype=torch.bfloat16)),
            ("optim/0/step", torch.tensor(value))]


def _write(store: NodeStore, step: int, value: float) -> int:
    k = store.next_slot()
    for dst, (_, src) in zip(store.layout.views(store.buffers[k]), _tensors(value), strict=True):
        dst.copy_(src)
    store.commit(k, step, {"client": {"data": {"epoch": 0, "index": step}}})
    return k


def _values(store: NodeStore) -> list[float]:
    held = store.held()
    assert held is not None
    return [float(t.float().flatten()[0]) for t in store.read(held)]


def test_two_slots_alternate_and_the_marker_names_the_complete_one(tmp_path: Path):
    store = NodeStore(tmp_path / "node1")
    store.allocate(Layout.of(_tensors(0.0)))
    assert store.held() is None  # nothing complete yet
    assert [_write(store, step, float(step)) for step in (1, 2, 3)] == [0, 1, 0]
    again = NodeStore(tmp_path / "node1")  # a relaunched rank reads it back
    held = again.held()
    assert held is not None and (held.step, held.slot) == (3, 0) and held.meta["client"]["data"]["index"] == 3
    assert _values(again) == [3.0, 3.0, 3.0]
    assert [t.shape for t in again.read(held)] == [(3, 5), (7,), ()]


def test_a_copy_killed_half_way_leaves_the_step_before_it(tmp_path: Path):
    store = NodeStore(tmp_path / "node1")
    store.allocate(Layout.of(_tensors(0.0)))
    _write(store, 1, 1.0)
    _write(store, 2, 2.0)
    k = store.next_slot()  # step 3's copy starts and the rank dies before the marker moves
    store.layout.views(store.buffers[k])[0].fill_(99.0)
    (store.folder / f"slot{k}.meta").write_bytes(b"torn")
    again = NodeStore(tmp_path / "node1")
    assert again.held().step == 2 and _values(again) == [2.0, 2.0, 2.0]


def test_files_that_do_not_agree_hold_nothing(tmp_path: Path):
    store = NodeStore(tmp_path / "node1")
    store.allocate(Layout.of(_tensors(0.0)))
    _write(store, 1, 1.0)
    marker = store.folder / "marker"
    marker.write_bytes(pickle.dumps({"slot": 0, "step": 1, "layout": "another"}))
    assert NodeStore(store.folder).held() is None
    marker.write_bytes(b"not a pickle")
    assert NodeStore(store.folder).held() is None
    assert NodeStore(tmp_path / "none").held() is None


def test_the_same_layout_made_again_keeps_the_step_held(tmp_path: Path):
    """After a relaunch the writer maps the slots again: the step restored from stays complete while the next one
    is copied into the other slot; another layout starts over."""
    store = NodeStore(tmp_path / "node1")
    store.allocate(Layout.of(_tensors(0.0)))
    _write(store, 5, 5.0)
    again = NodeStore(store.folder)
    again.allocate(Layout.of(_tensors(0.0)))
    assert again.held().step == 5 and again.next_slot() == 1
    other = NodeStore(store.folder)
    other.allocate(Layout.of(_tensors(0.0)[:2]))
    assert other.held() is None


def test_a_folder_per_job_run_and_node_and_stale_ones_of_other_jobs_go(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(peerstore, "base", lambda: tmp_path)
    a, b = peerstore.node_folder("101", tmp_path / "run-a"), peerstore.node_folder("101", tmp_path / "run-b")
    assert a != b and a.parent != peerstore.node_folder("102", tmp_path / "run-a").parent
    assert a.name == socket.gethostname().split(".")[0] and a.parent.name.startswith("peer-101-")
    old, fresh = peerstore.node_folder("7", tmp_path / "x"), peerstore.node_folder("8", tmp_path / "x")
    for folder in (a, old, fresh):
        folder.mkdir(parents=True)
        (folder / "marker").write_bytes(b"x")
    past = time.time() - peerstore.STALE_S - 60
    for p in (old / "marker", old):
        os.utime(p, (past, past))
    assert peerstore.sweep_stale(a.parent) == [old.parent]
    assert a.is_dir() and fresh.is_dir() and not old.parent.exists()
    store = NodeStore(a)
    store.remove()
    assert not a.parent.exists()  # the job's folder goes with its last node's


def test_each_ranks_rng_is_found_by_step(tmp_path: Path):
    store = NodeStore(tmp_path / "node1")
    store.write_rng(0, 0, 4, {"torch": "r0 at 4"})
    store.write_rng(1, 0, 4, {"torch": "r1 at 4"})
    store.write_rng(1, 1, 5, {"torch": "r1 at 5"})
    assert store.rng_at(4) == {0: {"torch": "r0 at 4"}, 1: {"torch": "r1 at 4"}}
    assert store.rng_at(5) == {1: {"torch": "r1 at 5"}}


# --- two gloo ranks, one "node" each


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.body = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight  # tied, as GPT-2's

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> object:
        logits = self.head(torch.tanh(self.body(self.emb(ids))))
        return type("Out", (), {"loss": torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())})()


def _worker(rank: int, port: int, tmp: str, phase: str) -> None:
    from hpclaunch.config.recipe import TrainSpec
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.engine import TorchEngine
    from hpclaunch.runtime.train.peer import Snapshots

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HPCLAUNCH_RESTART="1")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    d = Dist(rank, 2, 0, "cpu", "gloo", torch.device("cpu"))
    engine = TorchEngine(Tiny(), TrainSpec(max_steps=5, warmup_steps=2, lr=0.05), d, "fp32", grad_accum=1)
    snaps = Snapshots(d, engine, 1, Path(tmp) / f"node{rank}", Path(tmp), log=lambda msg: None)
    out: dict[str, object] = {}
    start = 0  # "first": 5 uninterrupted steps, snapshots up to step 3 only (where the fault strikes)
    if phase == "resume":
        client = snaps.restore(0, seed=1234)
        assert client is not None
        start = client["step"]
        out["client"] = client
        out["rng"] = torch.get_rng_state()
        out["refused"] = snaps.restore(start, seed=1234)  # a checkpoint as new as the snapshot wins
    train_to_5(engine, snaps, rank, start, phase, out)
    torch.save(out, Path(tmp) / f"{phase}-{rank}.pt")
    dist.destroy_process_group()


def train_to_5(engine: object, snaps: object, rank: int, start: int, phase: str, out: dict[str, object]) -> None:
    """Steps start+1..5 on Tiny, a batch per (step, rank); snapshots up to step 3 in the first phase (where the
    fault strikes), every step after a restart; out: the RNG states at step 3, the parameters and rate at the end."""
    for step in range(start + 1, 6):
        g = torch.Generator().manual_seed(step * 10 + rank)
        ids = torch.randint(0, 20, (4, 6), generator=g)
        engine.zero_grad()  # type: ignore[attr-defined]
        engine.micro_step({"ids": ids, "labels": ids.roll(1, 1)}, last=True)  # type: ignore[attr-defined]
        snaps.before_update()  # type: ignore[attr-defined]
        engine.step()  # type: ignore[attr-defined]
        if phase != "first" or step <= 3:
            snaps.take(step, {"data": {"epoch": 0, "index": step}})  # type: ignore[attr-defined]
        if step == 3:
            out["rng_at_3"] = torch.get_rng_state()
    out["params"] = {n: p.detach().clone() for n, p in engine.module.named_parameters()}  # type: ignore[attr-defined]
    out["lr"] = engine.lr  # type: ignore[attr-defined]


def _run(tmp: Path, phase: str, worker: object = None) -> list[dict]:
    """Two ranks of `worker` (default: this module's), each saving its results as <phase>-<rank>.pt."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # a collective that never completes (a rank stuck) aborts within a minute, and the test fails saying so
    before = os.environ.get("HPCLAUNCH_COLLECTIVE_TIMEOUT")
    os.environ["HPCLAUNCH_COLLECTIVE_TIMEOUT"] = "60"  # the ranks inherit it at their start
    try:
        ranks = mp.spawn(worker or _worker, args=(port, str(tmp), phase), nprocs=2, join=False)
    finally:
        if before is None:
            del os.environ["HPCLAUNCH_COLLECTIVE_TIMEOUT"]
        else:
            os.environ["HPCLAUNCH_COLLECTIVE_TIMEOUT"] = before
    deadline = time.monotonic() + 300
    while not ranks.join(timeout=5):
        if time.monotonic() > deadline:
            for proc in ranks.processes:
                proc.kill()
            pytest.fail(f"the two ranks of phase {phase!r} had not ended after 300 s (port {port})")
    return [torch.load(tmp / f"{phase}-{r}.pt", weights_only=False) for r in (0, 1)]


def test_fresh_ranks_go_on_from_a_peers_snapshot_with_an_uninterrupted_runs_parameters(tmp_path: Path):
    """Two ranks train 5 steps with snapshots up to step 3, as if they died there; node 1's memory is lost (its
    snapshot and RNG states). Both
    start fresh: rank 0's node memory gives step 3 to both (parameters, AdamW state, scheduler, data position),
    rank 0 keeps its own RNG states and rank 1 is seeded afresh; steps 4-5 then end where an uninterrupted run's
    do, bit for bit."""
    first = _run(tmp_path, "first")
    held = NodeStore(tmp_path / "node1").held()
    assert held is not None and held.step == 3
    names = [e.name for e in held.layout.entries]
    assert "model/head.weight" not in names and "model/emb.weight" in names  # the tied head is copied once
    assert sum(n.startswith("optim/") for n in names) == 3 * 3  # step, exp_avg, exp_avg_sq of 3 parameters
    NodeStore(tmp_path / "node1").remove()  # node 1 lost
    resumed = _run(tmp_path, "resume")
    for r in (0, 1):
        assert resumed[r]["client"] == {"data": {"epoch": 0, "index": 3}, "step": 3}
        assert resumed[r]["refused"] is None
        assert resumed[r]["lr"] == first[r]["lr"]
        for name, want in first[r]["params"].items():
            assert torch.equal(resumed[r]["params"][name], want), name
    assert torch.equal(resumed[0]["rng"], first[0]["rng_at_3"])  # rank 0's own RNG states from its node
    record = json.loads((tmp_path / "progress" / "resumed.restart-1.json").read_text())
    assert {k: record[k] for k in ("step", "source", "from_rank", "checkpoint_step", "fresh_rng_ranks")} == {
        "step": 3, "source": "peer", "from_rank": 0, "checkpoint_step": 0, "fresh_rng_ranks": [1]}


def test_the_job_scripts_cleanup_removes_this_jobs_snapshots_in_node_memory_and_no_others():
    """A launch that failed and was not relaunched: the Slurm job script runs PEER_MEMORY on each node (its end,
    templates/schedulers/slurm/end.sh.j2); it must find the folders peerstore puts there, and only this job's."""
    from hpclaunch.schedulers.slurm.scheduler import PEER_MEMORY

    job = f"77{os.getpid()}"
    mine, other = peerstore.job_folder(job, Path("/runs/a")), peerstore.job_folder(job + "1", Path("/runs/a"))
    for folder in (mine, other):
        (folder / "node1").mkdir(parents=True, exist_ok=True)
        (folder / "node1" / "slot0.bin").write_bytes(b"\0" * 64)
    try:
        said = subprocess.run(["bash", "-c", PEER_MEMORY], env={**os.environ, "HPCLAUNCH_JOB_ID": job}, check=True,
                              capture_output=True, text=True).stdout
        assert not mine.exists() and (other / "node1" / "slot0.bin").is_file()
        assert said.endswith(f": gave back the snapshots in node memory ({mine})\n"), said
        again = subprocess.run(["bash", "-c", PEER_MEMORY], env={**os.environ, "HPCLAUNCH_JOB_ID": job}, check=True,
                               capture_output=True, text=True).stdout
        assert again == ""  # nothing there: nothing said, and the node's task ends 0
    finally:
        shutil.rmtree(other, ignore_errors=True)
        shutil.rmtree(mine, ignore_errors=True)
