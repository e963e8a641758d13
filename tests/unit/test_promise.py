"""The goodput submit promises (hpclaunch/plan/promise.py, submission/measured.py): the formula against values
worked by hand, the dry run's words on a bundled profile, what earlier runs measured taking the place of the
defaults, and a bad profile setting refused. `report` sets the outcome beside it: tests/unit/test_timeline.py's
GPT-2 tiny job."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from hpclaunch.plan.promise import Figure, Inputs, Promise, best_interval_s, goodput, make, mtbf_s
from tests.unit.test_plan import staged  # noqa: F401  (the bundled profiles with the fixture configs staged)


def _inputs(**over: object) -> Inputs:
    """90 nodes at 0.001 failures per node-hour: M = 3600 / (90 x 0.001) = 40,000 s; a save blocks 8 s, a recovery
    takes 100 s, a 24 h limit."""
    given: dict[str, object] = {"nodes": 90, "limit_s": 86400.0, "rate": Figure(0.001, "test"),
                                "write": Figure(8.0, "test"), "recovery": Figure(100.0, "test")}
    return Inputs(**{**given, **over})  # type: ignore[arg-type]


def test_the_default_rate_is_metas_mttf_at_1024_gpus_per_node_hour():
    from hpclaunch.config.profile import RestartDefaults

    # 1,024 GPUs at 8 a node = 128 nodes; one failure in 7.9 h: 1 / (7.9 x 128) = 1 / 1,011.2 = 0.000989 per node-hour
    assert RestartDefaults().failures_per_node_hour == round(1 / (7.9 * 128), 6) == 0.000989
    # and back: 128 nodes at that rate meet one every 3600 / (128 x 0.000989) = 28,438 s = 7.90 h
    assert mtbf_s(128, 0.000989) / 3600 == pytest.approx(7.9, abs=0.01)


def test_the_formula_against_hand_computed_values():
    m = mtbf_s(90, 0.001)
    assert m == pytest.approx(40_000.0)  # 3600 / (90 x 0.001)
    # Young/Daly: sqrt(2 x 8 x 40,000) - 8 = sqrt(640,000) - 8 = 800 - 8 = 792 s
    assert best_interval_s(8.0, m) == pytest.approx(792.0)
    # at 792 s: 792 / 800 x (1 - (100 + 800 / 2) / 40,000) = 0.99 x 0.9875 = 0.977625
    assert goodput(792.0, 8.0, 100.0, m) == pytest.approx(0.977625)
    # every 200 s: 200 / 208 x (1 - (100 + 104) / 40,000) = 0.9615385 x 0.9949 = 0.9566346
    assert goodput(200.0, 8.0, 100.0, m) == pytest.approx(0.9566346, abs=1e-7)
    # no failures: only the saves cost, 792 / 800 = 0.99; and no interval is best
    assert goodput(792.0, 8.0, 100.0, math.inf) == pytest.approx(0.99)
    assert best_interval_s(8.0, math.inf) == math.inf
    # a failure more often than a save and a recovery take: nothing trains (never below 0)
    assert goodput(792.0, 8.0, 100.0, 300.0) == 0.0


def test_the_recipes_interval_from_its_steps_and_how_far_it_is_from_the_best():
    # save_every 100 steps at 2 s a step = 200 s: goodput 0.9566346 (above); 200 / 792 = 0.25, under 1/2: far
    p = make(_inputs(step=Figure(2.0, "test"), save_every=100))
    assert p.interval_s == 200.0 and p.goodput == pytest.approx(0.9566346, abs=1e-7)
    assert p.best_s == pytest.approx(792.0) and p.best_steps == 396  # 792 s / 2 s
    assert p.best_goodput == pytest.approx(0.977625) and p.far
    assert p.mtbf_h == pytest.approx(40_000 / 3600) and p.failures == pytest.approx(86_400 / 40_000)  # 2.16
    assert p.lines()[-5:] == ["  a step takes 2 s:", "    test",
                              "  best checkpoint interval (Young/Daly): every 13.2 min (396 steps)",  # 792 s / 60
                              "  the recipe saves every 100 steps = 3.33 min",  # 200 s / 60
                              "    far from it: 97.8 % at the best (train.save_every)"]
    # 400 steps = 800 s: 800 / 792 = 1.01, near it
    assert not make(_inputs(step=Figure(2.0, "test"), save_every=400)).far
    # the step time unknown: the interval in minutes only, the goodput at the best interval
    unknown = make(_inputs(save_every=100))
    assert unknown.interval_s is None and unknown.best_steps is None and not unknown.far
    assert unknown.goodput == pytest.approx(0.977625)


def test_a_run_shorter_than_its_limit_and_spare_nodes():
    # 1,000 steps at 2 s = 2,000 s of a 24 h limit, saved at the end only: tau = 2,000 s;
    # 2,000 / 2,008 x (1 - (100 + 1,004) / 40,000) = 0.9960159 x 0.9724 = 0.9685259; 2,000 / 40,000 = 0.05 failures
    p = make(_inputs(step=Figure(2.0, "test"), max_steps=1000))
    assert p.inputs.run_s == 2000.0 and p.interval_s == 2000.0
    assert p.goodput == pytest.approx(0.9685259, abs=1e-7) and p.failures == pytest.approx(0.05)
    # saving at the end of a run shorter than the best interval (792 s) is the best there is: not far
    short = make(_inputs(step=Figure(2.0, "test"), max_steps=100))  # 200 s
    assert short.interval_s == 200.0 and not short.far
    assert "    longer than the run: the save at the end is enough" in short.lines()
    # 10 spare nodes idle: x 90 / 100
    spared = make(_inputs(step=Figure(2.0, "test"), max_steps=1000, spare_nodes=10))
    assert spared.goodput == pytest.approx(0.9 * 0.9685259, abs=1e-7)


def test_the_promise_reads_back_from_its_json():
    p = make(_inputs(step=Figure(2.0, "measured"), save_every=100, spare_nodes=1))
    assert Promise.from_json(json.loads(json.dumps(p.to_json()))) == p
    none = make(_inputs(rate=Figure(0.0, "test")))  # nothing fails: no MTBF, no best interval (null, not Infinity)
    data = json.loads(json.dumps(none.to_json(), allow_nan=False))
    assert data["mtbf_h"] is None and data["best_s"] is None and Promise.from_json(data) == none
    assert "none needed" in none.summary()


def _said(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [line.removeprefix("hpclaunch: ") for line in result.stderr.splitlines()]


@pytest.mark.usefixtures("staged")
def test_the_dry_run_states_the_promise_on_a_bundled_profile(hpclaunch: Callable[..., Result]) -> None:
    result = hpclaunch("submit", "mixtral", "--profile", "guangzhou-a800", "--preset", "full", "--layout", "16n8g",
                       "--dry-run")
    said = _said(result)
    start = said.index(next(line for line in said if line.startswith("expected goodput")))
    # 16 nodes at 0.000989: M = 3600 / (16 x 0.000989) = 227,503 s = 63.2 h; 48 h / 63.2 h = 0.76 failures.
    # The plan's checkpoint, 654 GB at 1 GB/s: 654 s. Young/Daly: sqrt(2 x 654 x 227,503) - 654 = 16,596 s = 4.61 h;
    # there 16,596 / 17,250 x (1 - (300 + 17,250 / 2) / 227,503) = 0.96209 x 0.96077 = 0.924 (step time unknown)
    assert said[start:] == [
        "expected goodput 92.4 % after start-up",
        "  16 node(s) x 48 h (the time limit)",
        "  a failure every 63.2 h (0.76 expected in the run):",
        "    0.000989 per node-hour, profile restarts.failures_per_node_hour",
        "  a checkpoint blocks training 654 s:",
        "    the plan's 654 GB at 1 GB/s (storage.write_gbps)",
        "  a recovery takes 300 s:",
        "    profile restarts.recovery_time (no recovery measured)",
        "  best checkpoint interval (Young/Daly): every 4.61 h",
        "  the recipe saves every 500 steps (step time unknown)",
        "# dry run: nothing submitted; run directory " + said[-1].rsplit(" ", 1)[1],
    ]
    assert all(len("hpclaunch: " + line) <= 80 for line in said[start:-1])  # reads in 80 columns
    run_dir = Path(said[-1].rsplit(" ", 1)[1])
    written = json.loads((run_dir / "promise.json").read_text())
    assert written["goodput"] == pytest.approx(0.924, abs=5e-4) and written["inputs"]["nodes"] == 16
    # for scripts and agents: submit --json has it as `promise`
    again = hpclaunch("submit", "mixtral", "--profile", "guangzhou-a800", "--preset", "full", "--layout", "16n8g",
                      "--dry-run", "--json")
    promise = json.loads(again.stdout)["promise"]
    # best_s: 16,596 s above, with delta the plan's 654 GB rounded (the plan's own bytes: a few seconds less)
    assert promise["goodput"] == written["goodput"] and promise["best_s"] == pytest.approx(16_596, abs=5)


@pytest.mark.usefixtures("staged")
def test_what_earlier_runs_measured_replaces_the_defaults(hpclaunch: Callable[..., Result]) -> None:
    """An earlier job of the same recipe, preset, profile and layout that saved (blocked 2, 4 and 9 s: median 4 s)
    and recovered once (12.5 s from the fault to the next step)."""
    from hpclaunch.state import registry, timeline
    from hpclaunch.state.runfiles import RunFiles

    args = ("mixtral", "--profile", "guangzhou-a800", "--preset", "full", "--layout", "16n8g", "--dry-run")
    run = RunFiles(Path(_said(hpclaunch("submit", *args))[-1].rsplit(" ", 1)[1]))
    run.checkpoint_log.write_text("".join(json.dumps({"step": s, "blocked_s": b}) + "\n"
                                          for s, b in ((500, 2.0), (1000, 9.0), (1500, 4.0))))
    run.recoveries.write_text(json.dumps({"cause": "rank_killed", "detected_at": 1000.0, "restart": 0,
                                          "resumed_restart": 1}) + "\n")
    timeline.append(run.timeline, "first_step", restart=1, job="77", t=1012.5)
    registry.add(registry.JobRecord(job_id="77", scheduler="slurm", profile="guangzhou-a800", recipe="mixtral",
                                    preset="full", launcher="deepspeed", layout="16n8g", name="mixtral",
                                    run_dir=str(run.root), submitted_at="2026-11-28T10:00:00+0000"))
    said = _said(hpclaunch("submit", *args))
    at = said.index("  a checkpoint blocks training 4 s:")
    assert said[at:at + 4] == ["  a checkpoint blocks training 4 s:", "    measured, median of 3 saves (job 77)",
                               "  a recovery takes 12.5 s:", "    measured, median of 1 recovery (job 77)"]
    # M = 227,503 s: sqrt(2 x 4 x 227,503) - 4 = 1,349 - 4 = 1,345 s = 22.4 min
    assert "  best checkpoint interval (Young/Daly): every 22.4 min" in said
    # another layout is another job: the defaults again
    other = _said(hpclaunch("submit", *args[:-2], "8n8g", "--dry-run"))
    assert "  a checkpoint blocks training 654 s:" in other


def test_a_negative_failure_rate_is_refused_naming_file_and_key(write_profile: Callable[..., Path],
                                                                hpclaunch: Callable[..., Result]) -> None:
    path = write_profile(restarts={"failures_per_node_hour": -0.001})
    result = hpclaunch("submit", "allreduce", "--profile", str(path), "--dry-run")
    assert result.exit_code == 2
    assert f"{path}: restarts.failures_per_node_hour: Input should be greater than or equal to 0 (got -0.001)" in (
        result.output)
    assert "Traceback" not in result.output
