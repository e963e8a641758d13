"""Reading rank logs: tail from the end, grep, merging ranks and restarts, msrun files (following: test_follow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import hpclaunch.logs.read as read
from hpclaunch.cli.main import cli
from hpclaunch.state.runfiles import RunFiles
from tests.fixtures.jobrecords import add_local_record


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab1\r é", max_size=12), max_size=30),
    final_nl=st.booleans(),
    n=st.integers(1, 40),
    block=st.integers(1, 9),
)
def test_tail_matches_splitlines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], final_nl: bool, n: int, block: int
) -> None:
    p = tmp_path_factory.mktemp("t") / "f.log"
    data = "\n".join(lines).encode() + (b"\n" if final_nl and lines else b"")
    p.write_bytes(data)
    expected = data.split(b"\n")
    if data.endswith(b"\n"):
        expected.pop()
    if not data:
        expected = []
    old = read.TAIL_BLOCK, read.BLOCK
    read.TAIL_BLOCK = read.BLOCK = block
    try:
        assert read.tail_lines(p, n) == expected[-n:]
        assert read.tail_lines(p, n, re.compile(b"1")) == [ln for ln in expected if b"1" in ln][-n:]
        assert list(read.iter_lines(p)) == expected
    finally:
        read.TAIL_BLOCK, read.BLOCK = old


def _run(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir(parents=True)
    for restart in (0, 1):
        for rank in (0, 1, 10):
            (logs / f"rank-{rank}.restart-{restart}.log").write_text(
                "".join(f"r{rank} s{restart} line {i} loss={i / 10}\n" for i in range(5))
            )
    (logs / "job.5.out").write_text("hpclaunch: job 5 restart 0\n[rank0]: echoed\nsrun: error: task 1\n")
    (logs / "not-a-rank.log").write_text("x\n")
    return tmp_path


def test_files_are_ordered_by_restart_then_rank(tmp_path: Path) -> None:
    files = RunFiles(_run(tmp_path)).rank_logs()
    assert [(f.restart, f.rank) for f in files] == [(0, 0), (0, 1), (0, 10), (1, 0), (1, 1), (1, 10)]
    assert [(f.restart, f.rank) for f in RunFiles(tmp_path).rank_logs(rank=10)] == [(0, 10), (1, 10)]


def test_msrun_worker_logs_are_found(tmp_path: Path) -> None:
    for node, restart in ((0, 0), (1, 0), (0, 1)):
        d = tmp_path / "logs" / "msrun" / f"node{node}.restart-{restart}"
        d.mkdir(parents=True)
        (d / f"worker_{node * 2}.log").write_text("a\n")
        (d / "scheduler.log").write_text("s\n")
    files = RunFiles(tmp_path).rank_logs()
    assert [(f.restart, f.rank, f.kind) for f in files] == [(0, 0, "msrun"), (0, 2, "msrun"), (1, 0, "msrun")]


def test_merged_tail_takes_from_older_restarts_when_needed(tmp_path: Path) -> None:
    files = RunFiles(_run(tmp_path)).rank_logs(rank=1)
    lines = [ln.text for ln in read.merged(files, tail=7)]
    assert lines == [f"r1 s0 line {i} loss={i / 10}" for i in (3, 4)] + [
        f"r1 s1 line {i} loss={i / 10}" for i in range(5)
    ]


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Path) -> None:
    monkeypatch.setenv("HPCLAUNCH_HOME", str(tmp_path / "home"))
    add_local_record("local-5", run)


def test_cli_logs_all_restarts_prefixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path / "run")
    _home(tmp_path, monkeypatch, run)
    res = CliRunner().invoke(cli, ["logs", "local-5"], catch_exceptions=False)
    assert res.exit_code == 0
    out = res.output.splitlines()
    assert out[0] == "==> restart 0 <==" and out[1] == "[rank0] r0 s0 line 0 loss=0.0"
    assert "==> restart 1 <==" in out
    assert sum(ln.startswith("[rank") for ln in out) == 30
    assert out[-2:] == ["[job] hpclaunch: job 5 restart 0", "[job] srun: error: task 1"]  # echoes left out
    res = CliRunner().invoke(
        cli,
        ["logs", "local-5", "--rank", "10", "--tail", "2", "--grep", r"loss=0\.[34]", "--json"],
        catch_exceptions=False,
    )
    assert [json.loads(ln) for ln in res.output.splitlines()] == [
        {"schema": 1, "rank": 10, "restart": 1, "line": "r10 s1 line 3 loss=0.3"},
        {"schema": 1, "rank": 10, "restart": 1, "line": "r10 s1 line 4 loss=0.4"},
    ]


def test_cli_bad_grep_and_missing_rank_are_user_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _home(tmp_path, monkeypatch, _run(tmp_path / "run"))
    res = CliRunner().invoke(cli, ["logs", "local-5", "--grep", "("])
    assert res.exit_code == 2 and "--grep" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(cli, ["logs", "local-5", "--rank", "99"])
    assert res.exit_code == 2 and "rank 99" in res.output
    res = CliRunner().invoke(cli, ["logs", "nope"])
    assert res.exit_code == 2 and "unknown job 'nope'" in res.output
