"""hpclaunch report JOB (plots + summary) and hpclaunch compare JOB_A JOB_B (per-step loss difference).
Given a sweep's id, both overlay the sweep's elements: one line per element, the legend naming its values."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hpclaunch.cli import complete
from hpclaunch.cli.options import echo_json, examples, json_option
from hpclaunch.cli.status import describe_health
from hpclaunch.cli.tables import human
from hpclaunch.jobs.view import health_verdict
from hpclaunch.report import checkpoints, energy, goodput, usage
from hpclaunch.report.compare import config_differences, throughput_ratio
from hpclaunch.state import provenance, registry, stragglers, timeline
from hpclaunch.state.runfiles import RunFiles
from hpclaunch.state.sweeps import is_sweep, label, sweep_elements

if TYPE_CHECKING:
    from hpclaunch.report.metrics import Metrics


def _fmt(v: object) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


@click.command("report", epilog=examples("hpclaunch report 12345", "hpclaunch report 12345 --out plots/",
                                         "hpclaunch report 12350  # a sweep: one line per value"))
@click.argument("job", shell_complete=complete.job)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="folder for the PNGs "
              "(default RUN_DIR/report)")
@json_option
def report_cmd(job: str, out: Path | None, as_json: bool) -> None:
    """PNG plots of loss, lr and tokens/s per step from JOB's metrics, the start-up timeline as a bar, and a
    text summary."""
    from hpclaunch.report.metrics import load_run, summary
    from hpclaunch.report.plots import plot_run, plot_timeline

    record = registry.get(job)
    if is_sweep(record):
        _report_sweep(record, out, as_json)
        return
    if record.remote:  # submitted over SSH: a local copy of its run directory's small files; the plots go there
        from hpclaunch.jobs.remote import local_view

        record = local_view(record)
    m = load_run(Path(record.run_dir), job)
    out = out or Path(record.run_dir) / "report"
    paths = plot_run(m, out, f"job {job} ({record.recipe})")
    files = RunFiles(Path(record.run_dir))
    restarts = timeline.load(files)
    if restarts:
        paths.append(plot_timeline(restarts, out / "timeline.png", f"job {job}: start-up timeline"))
    info = summary(m)
    slow = stragglers.find(files)
    health = health_verdict(files)
    used, spent = _usage_energy(record)
    dev = used["devices"]
    spent["tokens_per_kwh"] = energy.tokens_per_kwh(_tokens(files.root, info), spent)
    saved = checkpoints.load(files)
    ledger = goodput.of_run(files, nodes=goodput.nodes_of(record.layout or ""), spare_nodes=record.spare_nodes,
                            restarts=restarts, saved=saved)
    text = "\n".join([*(f"{k}: {human(v) if k.endswith('_bytes') else _fmt(v)}" for k, v in info.items()
                        if v is not None),
                      *([goodput.describe(ledger)] if ledger else []),
                      *(checkpoints.describe(r, human) for r in saved),
                      *(f"timeline (restart {e['restart']}): {timeline.describe(e)}" for e in restarts),
                      *([f"node health: {describe_health(health)}"] if health else []),
                      *(f"straggler: {stragglers.describe(f)}" for f in slow),
                      f"usage ({used['source']}): {usage.describe(used, human)}",
                      f"devices: {usage.describe_devices(dev, human)}",
                      *energy.describe(spent),
                      *(f"warning: {w}" for w in [*used["warnings"], *dev.get("warnings", [])]),
                      *(f"note: {n}" for n in [used.get("note"), used.get("advice_note")] if n)])
    (out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    if as_json:
        echo_json({**info, "checkpoints": saved, **checkpoints.totals(saved), "timeline": restarts,
                   "goodput": ledger, "health": health, "stragglers": slow, "usage": used, "energy": spent,
                   "plots": [str(p) for p in paths],
                   "summary_file": str(out / "summary.txt")})
        return
    click.echo(text)
    for p in [*paths, out / "summary.txt"]:
        click.echo(f"wrote {p}")


def _usage_energy(record: registry.JobRecord) -> tuple[dict, dict]:
    """Elapsed vs requested time, CPU efficiency and peak memory (sacct when accounting is on, else the job's
    own samples), the devices' utilisation and memory (samples); and the energy record (report/energy.py)."""
    from hpclaunch.jobs.state import statuses
    from hpclaunch.schedulers import get_scheduler

    samples = usage.read_samples(RunFiles(Path(record.run_dir)).usage)
    measured = get_scheduler(record.scheduler, record.remote).usage(record.job_id)
    used = usage.with_peak(usage.summarize(**measured), samples) if measured else None
    if used is None:  # no accounting (or the local scheduler): the time from the status, the rest from samples
        used = usage.with_samples(usage.from_status(statuses([record])[record.job_id]), samples)
    used["devices"] = usage.devices(samples)
    facts = energy.job_facts(Path(record.run_dir))
    spent = energy.of_job(samples, elapsed_s=used["elapsed_s"], devices=facts["devices"],
                          cost_per_device_hour=facts["cost_per_device_hour"],
                          consumed_energy_j=used.get("consumed_energy_j"))
    return used, spent


def _tokens(run_dir: Path, info: dict) -> int | None:
    """Tokens the run trained: its steps x the tokens of a step (global batch x seq_len, resolved.yaml)."""
    steps, per_step = energy.steps_run(info), energy.job_facts(run_dir)["tokens_per_step"]
    return steps * per_step if steps and per_step else None


def _elements(record: registry.JobRecord) -> list[tuple[str, str, Metrics]]:
    """(job id, values, metrics) of each element of the sweep that has written metrics."""
    from hpclaunch.errors import NotFoundError
    from hpclaunch.report.metrics import load_run

    runs = []
    for e in sweep_elements(record):
        try:
            runs.append((e.job_id, label((e.sweep or {}).get("values") or {}), load_run(Path(e.run_dir), e.job_id)))
        except NotFoundError:
            click.echo(f"hpclaunch: warning: element {e.job_id} has written no metrics yet; left out", err=True)
    if not runs:
        raise NotFoundError("metrics of sweep", record.job_id,
                            hint=f"no element has written metrics yet (`hpclaunch status {record.job_id}`)")
    return runs


def _report_sweep(record: registry.JobRecord, out: Path | None, as_json: bool) -> None:
    from hpclaunch.report.metrics import summary
    from hpclaunch.report.plots import plot_overlay

    runs = _elements(record)
    out = out or Path(record.run_dir) / "report"
    paths = plot_overlay([(values, m) for _, values, m in runs], out, f"sweep {record.job_id} ({record.recipe})")
    infos = [{"job_id": job_id, "values": values, **summary(m)} for job_id, values, m in runs]
    lines = [f"{i['job_id']}  {i['values']}: " + ", ".join(f"{k} {_fmt(i[k])}" for k in _SWEEP_KEYS
             if i.get(k) is not None)
             for i in infos]
    costs = _sweep_energy(record, infos)
    (out / "summary.txt").write_text("\n".join([*lines, *_energy_rows(infos, costs, plain=True)]) + "\n",
                                     encoding="utf-8")
    if as_json:
        echo_json({"sweep": record.job_id, "elements": infos, "energy": costs, "plots": [str(p) for p in paths],
                   "summary_file": str(out / "summary.txt")})
        return
    click.echo("\n".join(lines))
    _energy_rows(infos, costs)
    for p in [*paths, out / "summary.txt"]:
        click.echo(f"wrote {p}")


def _sweep_energy(record: registry.JobRecord, infos: list[dict]) -> dict:
    """Each element's energy record (into its info, key `energy`) and the sweep's totals."""
    elements = {e.job_id: e for e in sweep_elements(record)}
    for info in infos:
        spent = _usage_energy(elements[info["job_id"]])[1]
        spent["tokens_per_kwh"] = energy.tokens_per_kwh(_tokens(Path(elements[info["job_id"]].run_dir), info),
                                                         spent)
        info["energy"] = spent
    return energy.total([i["energy"] for i in infos])


_ENERGY_HEADERS = ("job", "device-hours", "energy", "cost")


def _energy_rows(infos: list[dict], costs: dict, plain: bool = False) -> list[str]:
    """The sweep's energy table (one row per element and the total): printed, or as tab-separated lines."""
    from hpclaunch.cli.tables import print_table

    rows = [(i["job_id"], *energy.cells(i["energy"])) for i in infos]
    rows.append(("total", *energy.cells(costs)))
    notes = sorted({n for i in infos for n in i["energy"]["notes"]})
    if plain:
        return ["\t".join(_ENERGY_HEADERS), *("\t".join(r) for r in rows), *(f"note: {n}" for n in notes)]
    print_table(_ENERGY_HEADERS, rows, ids=("job",))
    for n in notes:
        click.echo(f"note: {n}")
    return []


_SWEEP_KEYS = ("steps", "first_loss", "last_loss", "min_loss", "eval_loss", "mean_tokens_per_s")


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
    from hpclaunch.errors import JobFailed
    from hpclaunch.report.metrics import load_run, loss_diff
    from hpclaunch.report.plots import plot_compare
    from hpclaunch.state.runarchive import open_run

    run_a = open_run(job_a)
    if job_b is None:
        if run_a.record is None or not is_sweep(run_a.record):
            raise click.UsageError(f"compare needs two runs (JOB_A JOB_B), or one sweep's id; {job_a} is no sweep")
        worst = _compare_sweep(run_a.record, out, as_json)
        if tolerance is not None and (worst is None or worst > tolerance):
            raise JobFailed(f"the elements' losses differ by {_fmt(worst)} > tolerance {tolerance:g}")
        return
    run_b = open_run(job_b)
    for r in (run_a.record, run_b.record):
        if r is not None and is_sweep(r):
            raise click.UsageError(f"{r.job_id} is a sweep: `hpclaunch compare {r.job_id}` compares its elements; "
                                   f"compare two of them by their ids (e.g. {r.job_id}_0 {r.job_id}_1)")
    job_a, job_b = run_a.label, run_b.label
    a, b = load_run(run_a.run_dir, job_a), load_run(run_b.run_dir, job_b)
    diff = loss_diff(a, b)
    path = out or run_a.run_dir / "report" / f"compare-{Path(job_b).name}.png"
    plot_compare(a, b, diff, path, (job_a, job_b))
    info = {k: v for k, v in diff.items() if k not in ("steps", "diff")}
    ratio = throughput_ratio(a, b)
    ran_with = provenance.differences(provenance.load(run_a.run_dir), provenance.load(run_b.run_dir))
    config = config_differences(run_a.run_dir, run_b.run_dir)
    spent = {"a": {"job": job_a, **_run_energy(run_a, a)}, "b": {"job": job_b, **_run_energy(run_b, b)}}
    if as_json:
        per_step = dict(zip(diff["steps"], diff["diff"], strict=True))
        echo_json({**info, "per_step": per_step, "plot": str(path), "throughput_ratio": ratio, "energy": spent,
                   "config_differences": [{"key": k, "a": va, "b": vb} for k, va, vb in config],
                   "provenance_differences": [{"key": k, "a": va, "b": vb} for k, va, vb in ran_with]})
    else:
        click.echo(f"steps compared: {diff['common_steps']} (only in {job_a}: {diff['only_a']}, "
                   f"only in {job_b}: {diff['only_b']})")
        click.echo(f"max abs loss difference: {_fmt(diff['max_abs_diff'])}")
        click.echo(f"mean abs loss difference: {_fmt(diff['mean_abs_diff'])}")
        if ratio is not None:
            click.echo(f"throughput ratio (tokens/s, {job_b} / {job_a}): {ratio:.3f}")
        click.echo("\n".join(_energy_lines(spent)))
        _print_differences(config, job_a, job_b, what="config")
        _print_differences(ran_with, job_a, job_b)
        click.echo(f"wrote {path}")
    if tolerance is not None and (diff["max_abs_diff"] is None or diff["max_abs_diff"] > tolerance):
        raise JobFailed(f"losses differ by {_fmt(diff['max_abs_diff'])} > tolerance {tolerance:g}")


def _run_energy(run: Any, m: Metrics) -> dict:
    """A run's energy record with its tokens per kWh (a run without a job record, e.g. an archive: no elapsed
    time, so no device-hours)."""
    from hpclaunch.report.metrics import summary

    if run.record is not None:
        spent = _usage_energy(run.record)[1]
    else:
        facts = energy.job_facts(run.run_dir)
        spent = energy.of_job([], elapsed_s=None, devices=facts["devices"],
                              cost_per_device_hour=facts["cost_per_device_hour"], consumed_energy_j=None)
    spent["tokens"] = _tokens(run.run_dir, summary(m))
    spent["tokens_per_kwh"] = energy.tokens_per_kwh(spent["tokens"], spent)
    return spent


def _energy_lines(spent: dict[str, dict]) -> list[str]:
    """compare's rows: device-hours, energy, cost and tokens per kWh of each run (`-`: not known)."""
    a, b = spent["a"], spent["b"]
    job_a, job_b = a["job"], b["job"]
    rows = [("device-hours", *(energy.cells(e)[0] for e in (a, b))), ("energy", *(energy.cells(e)[1] for e in (a, b))),
            ("cost", *(energy.cells(e)[2] for e in (a, b))),
            ("tokens per kWh", *(f"{e['tokens_per_kwh']:.4g}" if e["tokens_per_kwh"] else "-" for e in (a, b)))]
    lines = [f"{name}: {job_a} {va}, {job_b} {vb}" for name, va, vb in rows]
    notes = sorted({n for e in (a, b) for n in e["notes"]})
    return lines + [f"note: {n}" for n in notes]


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
    text = "(absent)" if v is None else _fmt(v).replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _compare_sweep(record: registry.JobRecord, out: Path | None, as_json: bool) -> float | None:
    """Each element's per-step loss difference to the first element with metrics; the largest of them."""
    from hpclaunch.report.metrics import loss_diff
    from hpclaunch.report.plots import plot_overlay

    runs = _elements(record)
    base_id, _, base = runs[0]
    out = out or Path(record.run_dir) / "report"
    paths = plot_overlay([(values, m) for _, values, m in runs], out, f"sweep {record.job_id}", prefix="compare-")
    rows = []
    for job_id, values, m in runs:
        diff = loss_diff(base, m)
        _, losses = m.series("loss")
        rows.append({"job_id": job_id, "values": values, "last_loss": losses[-1] if losses else None,
                     "min_loss": min(losses) if losses else None,
                     **{k: v for k, v in diff.items() if k not in ("steps", "diff")}})
    worst = max((r["max_abs_diff"] for r in rows if r["max_abs_diff"] is not None), default=None)
    if as_json:
        echo_json({"sweep": record.job_id, "base": base_id, "elements": rows, "max_abs_diff": worst,
                   "plots": [str(p) for p in paths]})
        return worst
    click.echo(f"sweep {record.job_id}: loss of each element, and its difference to {base_id}")
    for r in rows:
        click.echo(f"  {r['job_id']}  {r['values']}: last loss {_fmt(r['last_loss'])}, min loss {_fmt(r['min_loss'])}, "
                   f"max abs diff {_fmt(r['max_abs_diff'])} over {r['common_steps']} steps")
    for p in paths:
        click.echo(f"wrote {p}")
    return worst


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
    group.add_command(compare_cmd)
