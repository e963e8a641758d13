"""When the ranks save on their own before the job's end (docs/troubleshooting.md#time-limits).

The job script exports the job's end as the scheduler says it (HPCLAUNCH_END_TIME, epoch seconds). Rank 0
decides at each log step, the only point where the ranks agree on anything: the next chance to decide is one
window (the time since the last decision) away, so it saves now unless that window, the checkpoint and a margin
for the exit and the requeue (or the follow-on job's sbatch) still fit before the end. The checkpoint's time is
the last one's measured blocked + write time (RUN_DIR/checkpoints.jsonl, from earlier restarts too), or before
the first one the memory plan's checkpoint size over the profile's storage.write_gbps. Slurm's USR1
(checkpoint.lead_time before the limit) stays the backstop.

Standard library only: the decision is tested without torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from hpclaunch.state.runfiles import ENV_END_TIME, RunFiles, read_json_lines

SAFETY_S = 30.0  # the ranks' exit, then the requeue or the follow-on job's sbatch, before the time limit
WRITE_MARGIN = 1.5  # a write may be slower than the last one (a busier filesystem)


@dataclass(frozen=True)
class WriteEstimate:
    seconds: float
    source: str  # in words, for the log line that says why the job saved


def expected_write(files: RunFiles, plan_bytes: float | None, write_gbps: float) -> WriteEstimate:
    """The next checkpoint's time, blocked + written: the last one's as measured, else the plan's size over the
    filesystem's write rate, else 0 (no plan: the first save is decided on the margin alone)."""
    for rec in reversed(read_json_lines(files.checkpoint_log)):
        blocked, write = rec.get("blocked_s"), rec.get("write_s")
        if isinstance(blocked, (int, float)) and isinstance(write, (int, float)):
            # a synchronous write (async false) blocked for all of it: its blocked time holds its write time
            took = float(blocked) + (float(write) if rec.get("async", True) else 0.0)
            return WriteEstimate(took, f"the checkpoint of step {rec.get('step')} took {took:.1f} s")
    if plan_bytes:
        seconds = plan_bytes / (write_gbps * 1e9)
        return WriteEstimate(seconds, f"the plan's {plan_bytes / 1e9:.3g} GB at {write_gbps:g} GB/s: {seconds:.1f} s")
    return WriteEstimate(0.0, "no checkpoint written yet and no plan")


def end_time(environ: Mapping[str, str] | None = None) -> float | None:
    """The job's end from HPCLAUNCH_END_TIME; None when the scheduler did not say (or said nonsense)."""
    text = (os.environ if environ is None else environ).get(ENV_END_TIME, "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


@dataclass
class EndClock:
    """Rank 0's view of the time left. `decided_at`: the previous decision (the window starts there)."""

    end: float | None
    write: WriteEstimate
    decided_at: float

    def needed(self, window_s: float) -> float:
        """Seconds that must be left now so that one more window and a save still end before the job does."""
        return window_s + self.write.seconds * WRITE_MARGIN + SAFETY_S

    def must_save(self, now: float) -> str | None:
        """Why to save and stop now, in words; None to go on (or when the end is unknown)."""
        window, self.decided_at = max(now - self.decided_at, 0.0), now
        if self.end is None:
            return None
        left, need = self.end - now, self.needed(window)
        if left >= need:
            return None
        return (f"{left:.1f} s left, fewer than the {need:.1f} s that one more window ({window:.1f} s) and a "
                f"checkpoint ({self.write.source}, x{WRITE_MARGIN:g}) take with {SAFETY_S:.0f} s to spare")
