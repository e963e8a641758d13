"""PNG plots with matplotlib (imported here, on demand, with the Agg backend: no display needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpclaunch.report.metrics import Metrics

PLOTS = (("loss", "loss"), ("lr", "learning rate"), ("tokens_per_s", "tokens/s"))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(m: Metrics, out_dir: Path, title: str) -> list[Path]:
    """One PNG per metric that the run has: loss.png (with eval loss), lr.png, tokens_per_s.png."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for key, label in PLOTS:
        steps, values = m.series(key)
        if not steps:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, values, label=label)
        if key == "loss":
            ev = [(r["step"], r["eval_loss"]) for r in m.evals if "step" in r and "eval_loss" in r]
            if ev:
                ax.plot(*zip(*ev, strict=True), "o-", label="eval loss")
            ax.legend()
        paths.append(_save(plt, fig, ax, out_dir / f"{key}.png", f"{title}: {label}", label,
                           {"step": steps, key: values}))
    return paths


def _save(plt: Any, fig: Any, ax: Any, path: Path, title: str, label: str, data: object) -> Path:
    """Label the axes and write the PNG; the plotted numbers (`data`) ride along in its text chunk, so a
    script can check them."""
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Description": json.dumps(data)})
    plt.close(fig)
    return path


def plot_compare(a: Metrics, b: Metrics, diff: dict, path: Path, names: tuple[str, str]) -> Path:
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for m, name in zip((a, b), names, strict=True):
        top.plot(*m.series("loss"), label=name)
    top.set_ylabel("loss")
    top.legend()
    top.grid(alpha=0.3)
    bottom.plot(diff["steps"], diff["diff"], color="tab:red")
    bottom.set_ylabel(f"loss {names[1]} - {names[0]}")
    bottom.set_xlabel("step")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_overlay(runs: list[tuple[str, Metrics]], out_dir: Path, title: str, prefix: str = "") -> list[Path]:
    """One PNG per metric that any run has (loss, lr, tokens/s), one line per run, the legend naming each run
    (a sweep's elements by their values). The plotted numbers ride along in the PNG's text chunk."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for key, label in PLOTS:
        series = [(name, *m.series(key)) for name, m in runs]
        if not any(steps for _, steps, _ in series):
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, steps, values in series:
            if steps:
                ax.plot(steps, values, label=name)
        ax.legend()
        paths.append(_save(plt, fig, ax, out_dir / f"{prefix}{key}.png", f"{title}: {label}", label,
                           {name: {"step": steps, key: values} for name, steps, values in series}))
    return paths
