"""PNG plots with matplotlib (imported here, on demand, with the Agg backend: no display needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpclaunch.report.metrics import Metrics

PLOTS = (("loss", "loss"), ("lr", "learning rate"), ("tokens_per_s", "tokens/s"))


def _pyplot():
    from hpclaunch.core.extras import need

    need("matplotlib").use("Agg")
    return need("matplotlib.pyplot")


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


def _save(plt: Any, fig: Any, ax: Any, path: Path, title: str, label: str, data: object,
          xlabel: str = "step") -> Path:
    """Label the axes and write the PNG; the plotted numbers (`data`) ride along in its text chunk, so a
    script can check them."""
    ax.set_xlabel(xlabel)
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


def plot_timeline(restarts: list[dict[str, Any]], path: Path, title: str) -> Path:
    """The start-up timeline (hpclaunch.state.timeline.per_restart) as one horizontal bar per restart: a segment
    per span (queued, env, job script, launcher, imports, rendezvous, model load, data, first step, training), in
    seconds from the restart's first stamp. The spans ride along in the PNG's text chunk."""
    from hpclaunch.state.timeline import SPANS

    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(SPANS.values())
    colors = {name: plt.get_cmap("tab20")(i % 20) for i, name in enumerate(names)}  # 11 spans: each its own
    fig, ax = plt.subplots(figsize=(10, max(3.0, 1.2 + 0.6 * len(restarts))))
    labels, shown = [], set()
    for row, entry in enumerate(restarts):
        left = 0.0
        for name, width in entry["durations"].items():
            ax.barh(row, width, left=left, color=colors[name], label=None if name in shown else name.replace("_", " "))
            shown.add(name)
            left += width
        labels.append(f"restart {entry['restart']}")
    ax.set_yticks(range(len(restarts)), labels)
    ax.invert_yaxis()
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    return _save(plt, fig, ax, path, title, "", {str(e["restart"]): e["durations"] for e in restarts},
                 xlabel="seconds")
