"""A job's metrics as curves, for a face that draws them (the web view, hpclaunch/ui/): `curves` gives every
training record's step with its loss, throughput, learning rate, gradient norm and time, the eval records and the
checkpoints saved; `after` only the records past a step, for a view that adds the new points while the job runs. A
job submitted over SSH is read from the local copy of its run directory's small files (as `report` reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the values of a training record a curve can show, one list each (None where a record lacks it)
KEYS = ("loss", "tokens_per_s", "lr", "grad_norm", "time")


@dataclass(frozen=True)
class Curves:
    """A job's training records as columns: `steps`, and for each of KEYS one value per step (`values`); the eval
    records (`evals`: step, eval_loss, perplexity), the checkpoints (checkpoints.jsonl: step, why, blocked_s,
    write_s, bytes, restart, at), train.max_steps where the run says it; `notes`: why there is nothing yet."""

    job_id: str
    steps: list[int]
    values: dict[str, list[float | None]]
    evals: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    max_steps: int | None = None
    notes: tuple[str, ...] = ()

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """(steps, values) of the records that have `key`."""
        pairs = [(s, v) for s, v in zip(self.steps, self.values.get(key, []), strict=False) if v is not None]
        return [s for s, _ in pairs], [v for _, v in pairs]

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "steps": self.steps, "values": self.values, "evals": self.evals,
                "checkpoints": self.checkpoints, "max_steps": self.max_steps}


def curves(job: str, *, after: int | None = None, rank: int = 0) -> Curves:
    """JOB's metrics (rank `rank`'s; rank 0 writes them) as curves; with `after`, only the records of the steps
    after it. A job that has written no metrics yet has empty curves and a note, not an error."""
    import math

    from hpclaunch.jobs.watch import max_steps
    from hpclaunch.report import checkpoints
    from hpclaunch.report.metrics import load
    from hpclaunch.state import registry
    from hpclaunch.state.runfiles import RunFiles

    record = registry.get(job)
    if record.remote:  # submitted over SSH: the copy of its small files
        from hpclaunch.jobs.remote import local_view

        record = local_view(record)
    files = RunFiles(Path(record.run_dir))
    saved = checkpoints.load(files)
    total = max_steps(files.root)
    path = files.metrics_file(rank)
    if not path.is_file():
        return Curves(record.job_id, [], {k: [] for k in KEYS}, [], saved, total,
                      (f"job {record.job_id} has written no metrics yet",))
    m = load(path)
    train = [r for r in m.train if after is None or r["step"] > after]

    def number(v: object) -> float | None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        return float(v)

    values = {k: [number(r.get(k)) for r in train] for k in KEYS}
    evals = [{k: e.get(k) for k in ("step", "eval_loss", "perplexity")} for e in m.evals
             if isinstance(e.get("step"), int) and (after is None or e["step"] > after)]
    return Curves(record.job_id, [int(r["step"]) for r in train], values, evals, saved, total)
