"""hpclaunch report JOB (plots + summary) and hpclaunch compare JOB_A JOB_B (per-step loss difference): what
hpclaunch/api/reporting.py found, printed. Given a sweep's id, both overlay the sweep's elements."""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch import api
from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option, say
from hpclaunch.cli.tables import print_table


@click.command("report", epilog=examples("hpclaunch report 12345", "hpclaunch report 12345 --out plots/",
                                         "hpclaunch report 12350  # a sweep: one line per value"))
@click.argument("job", shell_complete=complete.job)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="folder for the PNGs "
              "(default RUN_DIR/report)")
@json_option
def report_cmd(job: str, out: Path | None, as_json: bool) -> None:
    """PNG plots of loss, lr and tokens/s per step from JOB's metrics, the start-up timeline as a bar, and a
    text summary."""
    done = api.report(job, out)
    if isinstance(done, api.SweepReport):
        say(done.notes)
    if as_json:
        echo_json(done)
        return
    click.echo("\n".join(done.lines))
    if isinstance(done, api.SweepReport):
        print_table(api.ENERGY_HEADERS, done.energy_rows(), ids=("job",))
        for n in done.energy_notes():
            click.echo(f"note: {n}")
    for p in [*done.plots, done.summary_file]:
        click.echo(f"wrote {p}")


@click.command("compare", epilog=examples("hpclaunch compare 12345 12346  # loss parity of two runs",
                                          "hpclaunch compare 12345 12346 --tolerance 1e-4  # exit 1 above it",
                                          "hpclaunch compare 12350  # a sweep's elements"))
@click.argument("job_a", shell_complete=complete.job)
@click.argument("job_b", required=False, shell_complete=complete.job)
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="the plot's path (default RUN_DIR_A/report/compare-JOB_B.png; for a sweep SWEEP_DIR/report/)")
@click.option("--tolerance", type=float, default=None, help="exit 1 when the max abs difference is above it")
@json_option
def compare_cmd(job_a: str, job_b: str | None, out: Path | None, tolerance: float | None, as_json: bool) -> None:
    """Per-step loss difference of two runs (B - A), its max abs value and a plot. Given one sweep's id
    (JOB_A alone): every element's loss on one plot, and each element's difference to element 0."""
    done = api.compare(job_a, job_b, out)
    if isinstance(done, api.SweepComparison):
        say(done.notes)
    if as_json:
        echo_json(done)
    elif isinstance(done, api.SweepComparison):
        _print_sweep(done)
    else:
        _print_comparison(done)
    done.check(tolerance)


def _print_comparison(c: api.Comparison) -> None:
    d, fmt = c.diff, api.fmt
    click.echo(f"steps compared: {d['common_steps']} (only in {c.job_a}: {d['only_a']}, "
               f"only in {c.job_b}: {d['only_b']})")
    click.echo(f"max abs loss difference: {fmt(d['max_abs_diff'])}")
    click.echo(f"mean abs loss difference: {fmt(d['mean_abs_diff'])}")
    if c.throughput_ratio is not None:
        click.echo(f"throughput ratio (tokens/s, {c.job_b} / {c.job_a}): {c.throughput_ratio:.3f}")
    click.echo("\n".join(c.energy_lines()))
    _print_differences(c.config, c.job_a, c.job_b, what="config")
    _print_differences(c.provenance, c.job_a, c.job_b)
    click.echo(f"wrote {c.plot}")


def _print_differences(found: list[tuple[str, object, object]], job_a: str, job_b: str,
                       what: str = "provenance") -> None:
    """What the two runs ran with that differs (provenance.json, or the resolved config), one line per key."""
    if not found:
        click.echo(f"{what}: no differences")
        return
    click.echo(f"{what} differences ({job_a} -> {job_b}):")
    for key, a, b in found:
        click.echo(f"  {key}: {_short(a)} -> {_short(b)}")


def _short(v: object, limit: int = 80) -> str:
    text = "(absent)" if v is None else api.fmt(v).replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _print_sweep(c: api.SweepComparison) -> None:
    fmt = api.fmt
    click.echo(f"sweep {c.sweep_id}: loss of each element, and its difference to {c.base}")
    for r in c.elements:
        click.echo(f"  {r['job_id']}  {r['values']}: last loss {fmt(r['last_loss'])}, min loss {fmt(r['min_loss'])}, "
                   f"max abs diff {fmt(r['max_abs_diff'])} over {r['common_steps']} steps")
    for p in c.plots:
        click.echo(f"wrote {p}")


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
    group.add_command(compare_cmd)
