"""After a run: `report` (plots, a summary, usage, energy; a sweep: its elements overlaid) and `compare` (the
per-step loss difference of two runs, or of a sweep's elements, with what differs in how they ran). Both write
their plots and return what they found; the CLI prints it, an MCP tool answers it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import JobFailed

if TYPE_CHECKING:
    from hpclaunch.report.metrics import Metrics
    from hpclaunch.state.registry import JobRecord
    from hpclaunch.state.runarchive import Run
    from hpclaunch.state.runfiles import RunFiles

SWEEP_KEYS = ("steps", "first_loss", "last_loss", "min_loss", "eval_loss", "mean_tokens_per_s")
ENERGY_HEADERS = ("job", "device-hours", "energy", "cost")


def fmt(v: object) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Report:
    """One job's report: `data` (its JSON), `lines` (the summary in words, as written to summary.txt) and the
    files written."""

    job_id: str
    data: dict[str, Any]
    lines: list[str]
    plots: list[Path]
    summary_file: Path

    def to_json(self) -> dict[str, Any]:
        return self.data


@dataclass(frozen=True)
class SweepReport:
    """A sweep's report: each element's summary and energy (`elements`), the totals, the lines in words, the
    files written; `notes`: elements left out."""

    sweep_id: str
    elements: list[dict[str, Any]]
    energy: dict[str, Any]
    lines: list[str]
    plots: list[Path]
    summary_file: Path
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"sweep": self.sweep_id, "elements": self.elements, "energy": self.energy,
                "plots": [str(p) for p in self.plots], "summary_file": str(self.summary_file)}

    def energy_rows(self) -> list[tuple[str, ...]]:
        """The energy table: one row per element (ENERGY_HEADERS), then the total."""
        from hpclaunch.report import energy

        rows = [(i["job_id"], *energy.cells(i["energy"])) for i in self.elements]
        return [*rows, ("total", *energy.cells(self.energy))]

    def energy_notes(self) -> list[str]:
        return sorted({n for i in self.elements for n in i["energy"]["notes"]})


def report(job: str, out: Path | None = None) -> Report | SweepReport:
    """PNG plots of loss, lr and tokens/s per step, the start-up timeline, and a summary (into `out`, default
    RUN_DIR/report); a sweep's id: every element on one plot."""
    from hpclaunch.core.units import human
    from hpclaunch.jobs.view import describe_health, health_verdict
    from hpclaunch.report import checkpoints, energy, goodput, usage
    from hpclaunch.report.metrics import load_run, summary
    from hpclaunch.report.plots import plot_run, plot_timeline
    from hpclaunch.state import registry, slownodes, stragglers, timeline
    from hpclaunch.state.runfiles import RunFiles
    from hpclaunch.state.sweeps import is_sweep

    record = registry.get(job)
    if is_sweep(record):
        return _report_sweep(record, out)
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
    swapped = slownodes.load(files)
    health = health_verdict(files)
    used, spent = usage_energy(record)
    dev = used["devices"]
    spent["tokens_per_kwh"] = energy.tokens_per_kwh(_tokens(files.root, info), spent)
    saved = checkpoints.load(files)
    ledger = goodput.of_run(files, nodes=goodput.nodes_of(record.layout or ""), spare_nodes=record.spare_nodes,
                            restarts=restarts, saved=saved)
    promise, promised = _promise(files, ledger, restarts)
    lines = [*(f"{k}: {human(v) if k.endswith('_bytes') else fmt(v)}" for k, v in info.items() if v is not None),
             *([goodput.describe(ledger)] if ledger else []), *promised,
             *(checkpoints.describe(r, human) for r in saved),
             *(f"timeline (restart {e['restart']}): {timeline.describe(e)}" for e in restarts),
             *([f"node health: {describe_health(health)}"] if health else []),
             *(f"straggler: {stragglers.describe(f)}" for f in slow),
             *(f"slow node: {slownodes.line(f)}" for f in swapped),
             f"usage ({used['source']}): {usage.describe(used, human)}",
             f"devices: {usage.describe_devices(dev, human)}",
             *energy.describe(spent),
             *(f"warning: {w}" for w in [*used["warnings"], *dev.get("warnings", [])]),
             *(f"note: {n}" for n in [used.get("note"), used.get("advice_note")] if n)]
    summary_file = out / "summary.txt"
    summary_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = {**info, "checkpoints": saved, **checkpoints.totals(saved), "timeline": restarts, "goodput": ledger,
            "promise": promise, "health": health, "stragglers": slow, "slow_nodes": swapped, "usage": used,
            "energy": spent, "plots": [str(p) for p in paths], "summary_file": str(summary_file)}
    return Report(job, data, lines, paths, summary_file)


def _promise(files: RunFiles, ledger: dict[str, Any] | None,
             restarts: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[str]]:
    """The goodput promised at submit (RUN_DIR/promise.json) and the outcome beside it: the ledger's goodput after
    the first start-up, as the promise counts it, and the recoveries; (None, []) for a job promised nothing."""
    from hpclaunch.plan.promise import outcome_line
    from hpclaunch.report.goodput import after_startup
    from hpclaunch.state import recoveries
    from hpclaunch.submission import measured

    made = measured.read(files.root)
    if made is None:
        return None, []
    lines, outcome = [f"promised at submit: {made.summary()}"], None
    if ledger:
        after, n = after_startup(ledger, restarts), len(recoveries.load(files))
        outcome = {"goodput_after_startup": after, "goodput": ledger["goodput"], "recoveries": n}
        lines.append(outcome_line(after, ledger["goodput"], n))
    return {"promised": made.to_json(), "outcome": outcome}, lines


def usage_energy(record: JobRecord) -> tuple[dict, dict]:
    """Elapsed vs requested time, CPU efficiency and peak memory (the scheduler's accounting where it has some,
    else the job's own samples), the devices' utilisation and memory (samples); and the energy record."""
    from hpclaunch.jobs.state import statuses
    from hpclaunch.report import energy, usage
    from hpclaunch.schedulers import get_scheduler
    from hpclaunch.state.runfiles import RunFiles

    samples = usage.read_samples(RunFiles(Path(record.run_dir)).usage)
    measured = get_scheduler(record.scheduler, record.remote).usage(record.job_id)
    used = usage.with_peak(usage.summarize(**measured), samples) if measured else None
    if used is None:  # no accounting: the time from the status, the rest from samples
        used = usage.with_samples(usage.from_status(statuses([record])[record.job_id]), samples)
    used["devices"] = usage.devices(samples)
    facts = energy.job_facts(Path(record.run_dir))
    spent = energy.of_job(samples, elapsed_s=used["elapsed_s"], devices=facts["devices"],
                          cost_per_device_hour=facts["cost_per_device_hour"],
                          consumed_energy_j=used.get("consumed_energy_j"))
    return used, spent


def _tokens(run_dir: Path, info: dict) -> int | None:
    """Tokens the run trained: its steps x the tokens of a step (global batch x seq_len, resolved.yaml)."""
    from hpclaunch.report import energy

    steps, per_step = energy.steps_run(info), energy.job_facts(run_dir)["tokens_per_step"]
    return steps * per_step if steps and per_step else None


def _elements(record: JobRecord) -> tuple[list[tuple[str, str, Metrics]], tuple[str, ...]]:
    """(job id, values, metrics) of each element of the sweep that has written metrics; notes on the others."""
    from hpclaunch.errors import NotFoundError
    from hpclaunch.report.metrics import load_run
    from hpclaunch.state.sweeps import label, sweep_elements

    runs, notes = [], []
    for e in sweep_elements(record):
        try:
            runs.append((e.job_id, label((e.sweep or {}).get("values") or {}), load_run(Path(e.run_dir), e.job_id)))
        except NotFoundError:
            notes.append(f"hpclaunch: warning: element {e.job_id} has written no metrics yet; left out")
    if not runs:
        raise NotFoundError("metrics of sweep", record.job_id,
                            hint=f"no element has written metrics yet (`hpclaunch status {record.job_id}`)")
    return runs, tuple(notes)


def _report_sweep(record: JobRecord, out: Path | None) -> SweepReport:
    from hpclaunch.report.metrics import summary
    from hpclaunch.report.plots import plot_overlay

    runs, notes = _elements(record)
    out = out or Path(record.run_dir) / "report"
    paths = plot_overlay([(values, m) for _, values, m in runs], out, f"sweep {record.job_id} ({record.recipe})")
    infos = [{"job_id": job_id, "values": values, **summary(m)} for job_id, values, m in runs]
    lines = [f"{i['job_id']}  {i['values']}: " + ", ".join(f"{k} {fmt(i[k])}" for k in SWEEP_KEYS
             if i.get(k) is not None) for i in infos]
    done = SweepReport(record.job_id, infos, _sweep_energy(record, infos), lines, paths, out / "summary.txt", notes)
    plain = ["\t".join(ENERGY_HEADERS), *("\t".join(r) for r in done.energy_rows()),
             *(f"note: {n}" for n in done.energy_notes())]
    done.summary_file.write_text("\n".join([*lines, *plain]) + "\n", encoding="utf-8")
    return done


def _sweep_energy(record: JobRecord, infos: list[dict]) -> dict:
    """Each element's energy record (into its info, key `energy`) and the sweep's totals."""
    from hpclaunch.report import energy
    from hpclaunch.state.sweeps import sweep_elements

    elements = {e.job_id: e for e in sweep_elements(record)}
    for info in infos:
        spent = usage_energy(elements[info["job_id"]])[1]
        spent["tokens_per_kwh"] = energy.tokens_per_kwh(_tokens(Path(elements[info["job_id"]].run_dir), info),
                                                         spent)
        info["energy"] = spent
    return energy.total([i["energy"] for i in infos])


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: the loss difference (`diff`, per step), the throughput ratio, what differs in their
    configs and in what they ran with, each run's energy, the plot."""

    job_a: str
    job_b: str
    diff: dict[str, Any]
    throughput_ratio: float | None
    config: list[tuple[str, Any, Any]]
    provenance: list[tuple[str, Any, Any]]
    energy: dict[str, dict[str, Any]]
    plot: Path

    @property
    def max_abs_diff(self) -> float | None:
        return self.diff["max_abs_diff"]

    def to_json(self) -> dict[str, Any]:
        info = {k: v for k, v in self.diff.items() if k not in ("steps", "diff")}
        per_step = dict(zip(self.diff["steps"], self.diff["diff"], strict=True))
        return {**info, "per_step": per_step, "plot": str(self.plot), "throughput_ratio": self.throughput_ratio,
                "energy": self.energy,
                "config_differences": [{"key": k, "a": va, "b": vb} for k, va, vb in self.config],
                "provenance_differences": [{"key": k, "a": va, "b": vb} for k, va, vb in self.provenance]}

    def energy_lines(self) -> list[str]:
        """Device-hours, energy, cost and tokens per kWh of each run (`-`: not known), then the notes."""
        from hpclaunch.report import energy

        a, b = self.energy["a"], self.energy["b"]
        cells = [energy.cells(a), energy.cells(b)]
        rows = [(name, cells[0][i], cells[1][i]) for i, name in enumerate(("device-hours", "energy", "cost"))]
        per_kwh = [f"{e['tokens_per_kwh']:.4g}" if e["tokens_per_kwh"] else "-" for e in (a, b)]
        rows.append(("tokens per kWh", per_kwh[0], per_kwh[1]))
        notes = sorted({n for e in (a, b) for n in e["notes"]})
        return [f"{name}: {a['job']} {va}, {b['job']} {vb}" for name, va, vb in rows] + [f"note: {n}" for n in notes]

    def check(self, tolerance: float | None) -> None:
        """JobFailed (exit 1) when the largest difference is above `tolerance`."""
        if tolerance is not None and (self.max_abs_diff is None or self.max_abs_diff > tolerance):
            raise JobFailed(f"losses differ by {fmt(self.max_abs_diff)} > tolerance {tolerance:g}")


@dataclass(frozen=True)
class SweepComparison:
    """A sweep's elements compared with its first: each element's last and least loss and difference."""

    sweep_id: str
    base: str
    elements: list[dict[str, Any]]
    plots: list[Path]
    notes: tuple[str, ...] = field(default=())

    @property
    def max_abs_diff(self) -> float | None:
        return max((r["max_abs_diff"] for r in self.elements if r["max_abs_diff"] is not None), default=None)

    def to_json(self) -> dict[str, Any]:
        return {"sweep": self.sweep_id, "base": self.base, "elements": self.elements,
                "max_abs_diff": self.max_abs_diff, "plots": [str(p) for p in self.plots]}

    def check(self, tolerance: float | None) -> None:
        if tolerance is not None and (self.max_abs_diff is None or self.max_abs_diff > tolerance):
            raise JobFailed(f"the elements' losses differ by {fmt(self.max_abs_diff)} > tolerance {tolerance:g}")


def compare(job_a: str, job_b: str | None = None, out: Path | None = None) -> Comparison | SweepComparison:
    """Per-step loss difference of two runs (B - A: job ids, run directories or archives) and a plot; one sweep's
    id alone: every element against the first."""
    from hpclaunch.errors import ConfigError
    from hpclaunch.report.compare import config_differences, throughput_ratio
    from hpclaunch.report.metrics import load_run, loss_diff
    from hpclaunch.report.plots import plot_compare
    from hpclaunch.state import provenance
    from hpclaunch.state.runarchive import open_run
    from hpclaunch.state.sweeps import is_sweep

    run_a = open_run(job_a)
    if job_b is None:
        if run_a.record is None or not is_sweep(run_a.record):
            raise ConfigError(f"compare needs two runs (JOB_A JOB_B), or one sweep's id; {job_a} is no sweep")
        return _compare_sweep(run_a.record, out)
    run_b = open_run(job_b)
    for r in (run_a.record, run_b.record):
        if r is not None and is_sweep(r):
            raise ConfigError(f"{r.job_id} is a sweep: `hpclaunch compare {r.job_id}` compares its elements; "
                              f"compare two of them by their ids (e.g. {r.job_id}_0 {r.job_id}_1)")
    job_a, job_b = run_a.label, run_b.label
    a, b = load_run(run_a.run_dir, job_a), load_run(run_b.run_dir, job_b)
    diff = loss_diff(a, b)
    path = out or run_a.run_dir / "report" / f"compare-{Path(job_b).name}.png"
    plot_compare(a, b, diff, path, (job_a, job_b))
    spent = {"a": {"job": job_a, **_run_energy(run_a, a)}, "b": {"job": job_b, **_run_energy(run_b, b)}}
    return Comparison(job_a, job_b, diff, throughput_ratio(a, b), config_differences(run_a.run_dir, run_b.run_dir),
                      provenance.differences(provenance.load(run_a.run_dir), provenance.load(run_b.run_dir)),
                      spent, path)


def _run_energy(run: Run, m: Metrics) -> dict:
    """A run's energy record with its tokens per kWh (a run without a job record, e.g. an archive: no elapsed
    time, so no device-hours)."""
    from hpclaunch.report import energy
    from hpclaunch.report.metrics import summary

    if run.record is not None:
        spent = usage_energy(run.record)[1]
    else:
        facts = energy.job_facts(run.run_dir)
        spent = energy.of_job([], elapsed_s=None, devices=facts["devices"],
                              cost_per_device_hour=facts["cost_per_device_hour"], consumed_energy_j=None)
    spent["tokens"] = _tokens(run.run_dir, summary(m))
    spent["tokens_per_kwh"] = energy.tokens_per_kwh(spent["tokens"], spent)
    return spent


def _compare_sweep(record: JobRecord, out: Path | None) -> SweepComparison:
    """Each element's per-step loss difference to the first element with metrics."""
    from hpclaunch.report.metrics import loss_diff
    from hpclaunch.report.plots import plot_overlay

    runs, notes = _elements(record)
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
    return SweepComparison(record.job_id, base_id, rows, paths, notes)
