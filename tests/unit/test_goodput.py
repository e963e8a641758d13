"""The goodput ledger of a run directory, from the records a job writes (timeline.jsonl, checkpoints.jsonl, the
progress records), computed by hand for a run with one fault and a relaunch inside the same allocation, and for a
run resubmitted by --retries (a second job, queued again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.report import goodput
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import RunFiles


def _run(tmp_path: Path, stamps: list[tuple[str, int, str, float]], checkpoints: list[dict],
         last: dict[int, int]) -> RunFiles:
    files = RunFiles(tmp_path / "run")
    files.root.mkdir()
    for phase, restart, job, t in stamps:
        timeline.append(files.timeline, phase, restart=restart, job=job, t=1_700_000_000 + t)
    files.checkpoint_log.write_text("".join(json.dumps(c) + "\n" for c in checkpoints))
    files.progress.mkdir()
    for restart, step in last.items():
        record = json.dumps({"rank": 0, "step": step, "phase": "done", "t": 0, "host": "node1"})
        (files.progress / f"rank-0.restart-{restart}.json").write_text(record.ljust(256))
    return files


START = [("env_ready", 5), ("launched", 6), ("ranks_started", 7), ("rendezvous_done", 8), ("model_loaded", 10),
         ("data_ready", 11), ("first_step", 12)]


def test_a_fault_relaunched_inside_the_allocation(tmp_path: Path) -> None:
    stamps = [("submitted", 0, "100", -30), ("started", 0, "100", 0)]
    stamps += [(p, 0, "100", t) for p, t in START] + [("finished", 0, "100", 60)]
    # relaunched 8 s after the fault, in the same job: its stamps start at `launched`
    stamps += [(p, 1, "100", t + 62) for p, t in START[1:]] + [("finished", 1, "100", 100)]
    checkpoints = [{"step": 20, "restart": 0, "blocked_s": 1.0, "write_s": 3.0},
                   {"step": 40, "restart": 1, "blocked_s": 0.5, "write_s": 3.0}]
    led = goodput.of_run(_run(tmp_path, stamps, checkpoints, {0: 50, 1: 80}), nodes=2, spare_nodes=1)
    assert led is not None
    assert led["allocated_s"] == pytest.approx(100)
    assert led["queued_s"] == pytest.approx(30) and led["queued_retries_s"] == 0
    # training: restart 0 from data_ready 11 to 60 (49 s), restart 1 from 73 to 100 (27 s) = 76 s for 110 steps
    # run (0 -> 50, then 20 -> 80); 30 of them again (resumed at 20 after reaching 50): 30 x 76 / 110
    again = 30 * 76 / 110
    assert led["recomputed_steps"] == 30
    lost = led["lost_s"]
    assert lost["recomputed"] == pytest.approx(again, abs=1e-3)
    assert lost["checkpoint_blocked"] == pytest.approx(1.5)
    assert lost["startup"] == pytest.approx(11 + 5)  # restart 0: 5+1+1+1+2+1; restart 1: launcher..data (1+1+2+1)
    assert lost["recovery"] == pytest.approx(8)  # 60 -> 68
    productive = 76 - 1.5 - again
    assert led["productive_s"] == pytest.approx(productive, abs=1e-3)
    assert led["goodput"] == pytest.approx(productive * 2 / (100 * 3), abs=1e-4)
    assert led["spares_idle_node_s"] == pytest.approx(100)
    text = goodput.describe(led)
    assert text.startswith(f"goodput {100 * led['goodput']:.1f} % of 2 node(s) (+1 spare) x 1m40s: start-up 16s, ")
    assert "recovery 8.0s" in text and "queued 30s" in text


def test_a_retry_is_a_second_allocation_and_its_queue_is_listed_apart(tmp_path: Path) -> None:
    stamps = [("submitted", 0, "100", 0), ("started", 0, "100", 10)]
    stamps += [(p, 0, "100", t + 10) for p, t in START] + [("finished", 0, "100", 50)]
    stamps += [("submitted", 1, "101", 50), ("started", 1, "101", 250)]
    stamps += [(p, 1, "101", t + 250) for p, t in START] + [("finished", 1, "101", 300)]
    led = goodput.of_run(_run(tmp_path, stamps, [], {0: 30, 1: 60}), nodes=1)
    assert led is not None
    assert led["allocated_s"] == pytest.approx(40 + 50)
    assert led["queued_s"] == pytest.approx(10) and led["queued_retries_s"] == pytest.approx(200)
    assert led["recomputed_steps"] == 30 and led["lost_s"]["recovery"] == 0  # no checkpoint: all of it again
    assert "again 3m20s for later jobs" in goodput.describe(led)


def test_nothing_ran_yet_has_no_ledger(tmp_path: Path) -> None:
    assert goodput.of_run(_run(tmp_path, [("submitted", 0, "100", 0)], [], {}), nodes=1) is None


def test_a_hang_counts_as_lost_not_as_training(tmp_path: Path) -> None:
    """A launch whose ranks stopped making progress 64 s before the watchdog ended it: those 64 s are `hung`, not
    productive (it said 89.4 % before), and the recomputed work is priced at the step time while it moved."""
    stamps = [("submitted", 0, "100", -5), ("started", 0, "100", 0)]
    stamps += [(p, 0, "100", t) for p, t in START] + [("finished", 0, "100", 78)]
    files = _run(tmp_path, stamps, [], {0: 20})
    hung_at = 1_700_000_000 + 78 - 64  # rank 0 waited in the all-reduce, rank 1 hung in data: none moved since
    for rank, phase in ((0, "collective"), (1, "data")):
        record = json.dumps({"rank": rank, "step": 20, "phase": phase, "t": hung_at - rank * 0.5, "host": "node1"})
        (files.progress / f"rank-{rank}.restart-0.json").write_text(record.ljust(256))
    led = goodput.of_run(files, nodes=1)
    assert led is not None
    assert led["lost_s"]["hung"] == pytest.approx(64)
    # training: data_ready 11 -> 78 = 67 s, of which 64 s hung: 3 s moved
    assert led["productive_s"] == pytest.approx(67 - 64) and led["goodput"] == pytest.approx(3 / 78, abs=1e-4)
    assert "no progress (hang) 1m04s" in goodput.describe(led)
    # the same launch ended with every rank done: no hang
    for rank in (0, 1):
        record = json.dumps({"rank": rank, "step": 20, "phase": "done", "t": hung_at, "host": "node1"})
        (files.progress / f"rank-{rank}.restart-0.json").write_text(record.ljust(256))
    assert goodput.of_run(files, nodes=1)["lost_s"]["hung"] == 0
