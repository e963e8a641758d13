"""hpclaunch report JOB (plots + summary) and hpclaunch compare JOB_A JOB_B (per-step loss difference)."""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch import registry
from hpclaunch.cli.options import echo_json, json_option


def _fmt(v: object) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


@click.command("report")
@click.argument("job")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="folder for the PNGs "
              "(default RUN_DIR/report)")
@json_option
def report_cmd(job: str, out: Path | None, as_json: bool) -> None:
    """PNG plots of loss, lr and tokens/s per step from JOB's metrics, and a text summary."""
    from hpclaunch.report.metrics import load_run, summary
    from hpclaunch.report.plots import plot_run

    record = registry.get(job)
    m = load_run(Path(record.run_dir), job)
    out = out or Path(record.run_dir) / "report"
    paths = plot_run(m, out, f"job {job} ({record.recipe})")
    info = summary(m)
    text = "\n".join(f"{k}: {_fmt(v)}" for k, v in info.items())
    (out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    if as_json:
        echo_json({**info, "plots": [str(p) for p in paths], "summary_file": str(out / "summary.txt")})
        return
    click.echo(text)
    for p in [*paths, out / "summary.txt"]:
        click.echo(f"wrote {p}")


@click.command("compare")
@click.argument("job_a")
@click.argument("job_b")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="the plot's path (default RUN_DIR_A/report/compare-JOB_B.png)")
@click.option("--tolerance", type=float, default=None, help="exit 1 when the max abs difference is above it")
@json_option
def compare_cmd(job_a: str, job_b: str, out: Path | None, tolerance: float | None, as_json: bool) -> None:
    """Per-step loss difference of two runs (B - A), its max abs value and a plot."""
    from hpclaunch.errors import JobFailed
    from hpclaunch.report.metrics import load_run, loss_diff
    from hpclaunch.report.plots import plot_compare

    ra, rb = registry.get(job_a), registry.get(job_b)
    a, b = load_run(Path(ra.run_dir), job_a), load_run(Path(rb.run_dir), job_b)
    diff = loss_diff(a, b)
    path = out or Path(ra.run_dir) / "report" / f"compare-{job_b}.png"
    plot_compare(a, b, diff, path, (job_a, job_b))
    info = {k: v for k, v in diff.items() if k not in ("steps", "diff")}
    if as_json:
        per_step = dict(zip(diff["steps"], diff["diff"], strict=True))
        echo_json({**info, "per_step": per_step, "plot": str(path)})
    else:
        click.echo(f"steps compared: {diff['common_steps']} (only in {job_a}: {diff['only_a']}, "
                   f"only in {job_b}: {diff['only_b']})")
        click.echo(f"max abs loss difference: {_fmt(diff['max_abs_diff'])}")
        click.echo(f"mean abs loss difference: {_fmt(diff['mean_abs_diff'])}")
        click.echo(f"wrote {path}")
    if tolerance is not None and (diff["max_abs_diff"] is None or diff["max_abs_diff"] > tolerance):
        raise JobFailed(f"losses differ by {_fmt(diff['max_abs_diff'])} > tolerance {tolerance:g}")


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
    group.add_command(compare_cmd)
