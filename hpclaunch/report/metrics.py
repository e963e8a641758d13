"""Load metrics JSON lines. Training records carry `step` and `loss` (and lr, grad_norm, tokens_per_s,
samples_per_s, peak_mem_bytes, maybe mfu); eval records carry `eval_loss` / `perplexity`. Unknown fields
are kept, broken lines skipped. Across a requeue the resumed run writes some steps again: the last record
of a step wins, so a resumed run reads like one run."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hpclaunch.errors import NotFoundError
from hpclaunch.state.runfiles import RunFiles


@dataclass
class Metrics:
    path: Path
    train: list[dict] = field(default_factory=list)  # one per step, ordered by step
    evals: list[dict] = field(default_factory=list)
    model: dict | None = None  # the "model" record written after the load (parameters, bytes held per rank)
    skipped: int = 0

    def series(self, key: str) -> tuple[list[int], list[float]]:
        steps, values = [], []
        for r in self.train:
            v = r.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                steps.append(int(r["step"]))
                values.append(float(v))
        return steps, values


def load(path: Path) -> Metrics:
    m = Metrics(Path(path))
    by_step: dict[int, dict] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                m.skipped += 1
                continue
            if not isinstance(rec, dict):
                m.skipped += 1
                continue
            if "eval_loss" in rec or "perplexity" in rec:
                m.evals.append(rec)
            elif rec.get("kind") == "model":
                m.model = rec
            elif isinstance(rec.get("step"), int) and "loss" in rec:
                by_step[rec["step"]] = rec
            else:
                m.skipped += 1
    m.train = [by_step[s] for s in sorted(by_step)]
    return m


def load_run(run_dir: Path, job_id: str, rank: int = 0) -> Metrics:
    path = RunFiles(run_dir).metrics_file(rank)
    if not path.is_file():
        raise NotFoundError("metrics file", str(path),
                            hint=f"job {job_id} has written no metrics yet (`hpclaunch status {job_id}`); "
                                 "only recipes that use the hpclaunch runtime write them")
    return load(path)


def summary(m: Metrics) -> dict:
    """The numbers a person looks at first."""
    out: dict = {"metrics_file": str(m.path), "steps": len(m.train)}
    if m.train:
        first, last = m.train[0], m.train[-1]
        _, losses = m.series("loss")
        out.update(first_step=first["step"], last_step=last["step"], first_loss=first.get("loss"),
                   last_loss=last.get("loss"), min_loss=min(losses) if losses else None)
        for key in ("tokens_per_s", "samples_per_s", "mfu"):
            _, vals = m.series(key)
            if vals:
                out[f"mean_{key}"] = sum(vals) / len(vals)
        _, mem = m.series("peak_mem_bytes")
        if mem:
            out["peak_mem_bytes"] = max(mem)
        if "lr" in last:
            out["last_lr"] = last["lr"]
    if m.model:
        out.update({k: m.model[k] for k in ("params", "param_bytes", "held_param_bytes") if k in m.model})
    if m.evals:
        ev = m.evals[-1]
        out.update({k: ev[k] for k in ("eval_loss", "perplexity") if k in ev})
    if m.skipped:
        out["skipped_lines"] = m.skipped
    return out


def last_metrics(run_dir: Path) -> dict | None:
    """The last training record of rank 0, with the fields of a later eval record merged in (read from the
    end of the file), or None."""
    from hpclaunch.logs.read import tail_lines

    path = RunFiles(run_dir).metrics_file(0)
    if not path.is_file():
        return None
    evals: dict = {}
    for raw in reversed(tail_lines(path, 50)):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        if "eval_loss" in rec or "perplexity" in rec:
            evals = evals or rec
        elif "step" in rec and rec.get("kind") != "model":
            return {**rec, **{k: v for k, v in evals.items() if k != "step"}}
    return evals or None


def loss_diff(a: Metrics, b: Metrics) -> dict:
    """Per-step loss difference (b - a) over the steps both runs have."""
    sa, la = a.series("loss")
    sb, lb = b.series("loss")
    da, db = dict(zip(sa, la, strict=True)), dict(zip(sb, lb, strict=True))
    common = sorted(set(da) & set(db))
    diffs = [db[s] - da[s] for s in common]
    return {"steps": common, "diff": diffs, "common_steps": len(common),
            "only_a": len(set(da) - set(db)), "only_b": len(set(db) - set(da)),
            "max_abs_diff": max((abs(x) for x in diffs), default=None),
            "mean_abs_diff": (sum(abs(x) for x in diffs) / len(diffs)) if diffs else None}
