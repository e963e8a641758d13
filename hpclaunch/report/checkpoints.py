"""The checkpoints a run wrote (RUN_DIR/checkpoints.jsonl, one line each from rank 0): why each was saved, how
long training was blocked (the copy off the device; the whole write where the engine writes synchronously) and
how long the write took after that. Read by `hpclaunch report`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpclaunch.state.runfiles import RunFiles, read_json_lines

WHY = {"interval": "every train.save_every steps", "final": "at the last step",
       "signal": "on USR1/SIGTERM (preemption or the time limit)", "end": "on its own before the time limit",
       "stop_at": "HPCLAUNCH_STOP_AT_STEP"}


def load(files: RunFiles) -> list[dict[str, Any]]:
    """The checkpoint records in the order written (across restarts); a line without a step is skipped."""
    return [r for r in read_json_lines(files.checkpoint_log) if isinstance(r.get("step"), int)]


def describe(rec: dict[str, Any], size: Callable[[float], str]) -> str:
    """``checkpoint step 40 (end): blocked 0.02 s, written in the background in 1.3 s more, 2.3 MiB, restart 0``
    (a synchronous write: blocked for all of it, the write's own part said as such)."""
    blocked, write = float(rec.get("blocked_s") or 0.0), float(rec.get("write_s") or 0.0)
    how = (f"written in the background in {write:.3g} s more" if rec.get("async")
           else f"written synchronously (the engine's own save) in {write:.3g} s of it")
    return (f"checkpoint step {rec['step']} ({rec.get('why', '?')}): blocked {blocked:.3g} s, {how}, "
            f"{size(float(rec.get('bytes') or 0))}, restart {rec.get('restart', '?')}")


def totals(records: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds training was blocked by checkpoints, and seconds they were written in, in all."""
    return {"checkpoint_blocked_s": round(sum(float(r.get("blocked_s") or 0.0) for r in records), 4),
            "checkpoint_write_s": round(sum(float(r.get("write_s") or 0.0) for r in records), 4)}
