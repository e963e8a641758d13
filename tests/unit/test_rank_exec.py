"""rank_exec prefixes each line of a rank with `[rank<R>]: `, once: torch already prefixes a rank's uncaught
traceback with the same words, which used to come out as `[rank0]: [rank0]: Traceback`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_each_line_gets_one_prefix(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('[rank0]: Traceback (most recent call last):')\nprint('plain line')\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HPCLAUNCH_LOG_DIR": str(tmp_path), "RANK": "0"}
    env.pop("HPCLAUNCH_RUN_DIR", None)
    out = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(script)], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.splitlines() == ["[rank0]: Traceback (most recent call last):", "[rank0]: plain line"]
    assert (tmp_path / "rank-0.restart-0.log").read_text().splitlines() == [
        "[rank0]: Traceback (most recent call last):", "plain line"]  # the rank's own log keeps its lines as written
