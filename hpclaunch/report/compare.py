"""What `compare` says beyond the loss difference: the throughput ratio and what the two resolved configs set
differently (seed 000's cross-cluster comparison: same model, two clusters)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from hpclaunch.report.metrics import Metrics
from hpclaunch.state.provenance import differences
from hpclaunch.state.runfiles import RunFiles

# resolved.yaml keys that name the run rather than set it (`sets` records the --set flags, whose effect is in
# the recipe's keys already)
_PER_RUN = ("name", "recipe_dir", "hpclaunch_version", "sets")


def throughput_ratio(a: Metrics, b: Metrics) -> float | None:
    """Median tokens/s of B over A's (each run's first log window, start-up and compilation, left out)."""
    def median(m: Metrics) -> float | None:
        _, values = m.series("tokens_per_s")
        values = values[1:] or values
        return statistics.median(values) if values else None

    ta, tb = median(a), median(b)
    return tb / ta if ta and tb else None


def resolved(run_dir: Path) -> dict[str, Any]:
    """The run's resolved.yaml as data ({} where it has none)."""
    import yaml

    path = RunFiles(run_dir).resolved
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return data if isinstance(data, dict) else {}


def _resolved(run_dir: Path) -> dict[str, Any]:
    return {k: v for k, v in resolved(run_dir).items() if k not in _PER_RUN}


def config_differences(run_a: Path, run_b: Path) -> list[tuple[str, Any, Any]]:
    """(dotted key, value in A, value in B) for every resolved setting that differs: profile, layout, recipe."""
    return differences(_resolved(run_a), _resolved(run_b))
