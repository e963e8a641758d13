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


def test_the_first_rank_of_a_node_names_its_python_environment(tmp_path: Path) -> None:
    """python.stage node-local: the node's copy (HPCLAUNCH_ENV_KEY), or the shared one with the reason when staging
    failed and python.stage_fallback is shared (HPCLAUNCH_ENV_FALLBACK); nothing without node-local staging."""
    script = tmp_path / "train.py"
    script.write_text("print('step 1')\n")
    reason = "a node could not copy the python environment to its local scratch"
    for name, extra in (("staged", {"HPCLAUNCH_ENV_KEY": "abc"}), ("fallback", {"HPCLAUNCH_ENV_FALLBACK": reason}),
                        ("shared", {})):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HPCLAUNCH_")}
        env.update(PYTHONPATH=str(REPO), HPCLAUNCH_LOG_DIR=str(tmp_path / name), RANK="1", LOCAL_RANK="0", **extra)
        subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(script)], env=env,
                       capture_output=True, text=True, timeout=120, check=True)
        first = (tmp_path / name / "rank-1.restart-0.log").read_text().splitlines()[0]
        said = {"staged": f"hpclaunch: python environment: {sys.prefix}",
                "fallback": f"hpclaunch: python environment: {sys.prefix} (the shared one: python.stage_fallback "
                            f"shared, {reason})",
                "shared": "step 1"}
        assert first == said[name], (name, first)
