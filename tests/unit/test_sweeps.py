"""Sweeps (`submit --sweep KEY=V1,V2 [--max-parallel K]`): the cartesian product, up-front validation that
names the bad element, the rendered array script (bash -n, golden), the local scheduler running the elements
K at a time, and jobs/status/report/compare of a sweep."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from hpclaunch.errors import ConfigError
from hpclaunch.state import registry
from hpclaunch.submission import sweep
from hpclaunch.submission.render import render_sweep
from hpclaunch.submission.resolve import CliOverrides

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"


def test_product_is_every_combination_last_key_fastest():
    axes = sweep.parse_axes(["train.lr=1e-4,3e-4", "train.seed=1,2,3"])
    combos = sweep.product(axes)
    assert len(combos) == 6
    assert combos[0] == {"train.lr": "1e-4", "train.seed": "1"}
    assert combos[1] == {"train.lr": "1e-4", "train.seed": "2"}
    assert combos[5] == {"train.lr": "3e-4", "train.seed": "3"}


def test_values_split_on_commas_outside_brackets():
    (axis,) = sweep.parse_axes(["args=[--a,1],[--b,2]"])
    assert axis.values == ("[--a,1]", "[--b,2]")


@pytest.mark.parametrize("items, sets, words", [
    (["train.lr"], (), "expected KEY=V1,V2"),
    (["train.lr=1e-4,,3e-4"], (), "empty value"),
    (["train.lr=1e-4,1e-4"], (), "given twice"),
    (["train.lr=1,2", "train.lr=3"], (), "given twice"),
    (["train.lr=1,2"], ("train.lr=3",), "both set train.lr"),
    (["train..lr=1,2"], (), "not a dotted key"),
])
def test_bad_sweep_options_are_refused(items, sets, words):
    with pytest.raises(ConfigError, match=words):
        sweep.parse_axes(items, sets)


def test_too_many_elements_are_refused():
    axes = sweep.parse_axes([f"a{i}=1,2" for i in range(11)])
    with pytest.raises(ConfigError, match="2048 elements; one job array holds at most 1000"):
        sweep.product(axes)


def test_one_bad_value_refuses_the_whole_sweep_naming_the_element(hpclaunch, hpc_home):
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--sweep", "train.lr=1e-4,abc,3e-4")
    assert result.exit_code == 2
    assert "sweep element 1 of 3 (train.lr=abc)" in result.stderr
    assert "train.lr" in result.stderr and "nothing was submitted" in result.stderr
    assert "Traceback" not in result.output
    assert not (hpc_home / "runs").exists() or not any((hpc_home / "runs").iterdir())
    assert registry.all_records() == []


def test_elements_that_need_other_resources_are_refused(hpclaunch, hpc_home):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--sweep", "layout=1n1g,1n2g", "--dry-run")
    assert result.exit_code == 2
    assert ("sweep element 1 needs #SBATCH --gres=gpu:2, --mem=2G where element 0 has --gres=gpu:1, --mem=1G"
            in result.stderr)
    memory = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--sweep", "resources.mem_per_device=512,1G",
                       "--dry-run")
    assert memory.exit_code == 2
    assert "sweep element 1 needs #SBATCH --mem=2G where element 0 has --mem=1G" in memory.stderr


def test_max_parallel_needs_a_sweep_and_a_sweep_needs_a_recipe(hpclaunch, tmp_path):
    result = hpclaunch("submit", "allreduce", "--profile", "local", "--max-parallel", "2")
    assert result.exit_code == 2 and "--max-parallel goes with --sweep" in result.stderr
    resolved = tmp_path / "resolved.yaml"
    resolved.write_text("hpclaunch_version: 0.1.0\n")
    result = hpclaunch("submit", str(resolved), "--sweep", "train.lr=1,2")
    assert result.exit_code == 2 and "--sweep resolves a recipe again" in result.stderr


def _render_golden_sweep() -> str:
    cli = CliOverrides(layout="1n1g")
    elements = sweep.resolve_elements("allreduce", "dev-slurm", cli, sweep.parse_axes(["train.lr=1e-4,3e-4"]))
    return render_sweep([s for _, s in elements], [sweep.label(v) for v, _ in elements], ["train.lr"],
                        Path("/runs/golden-sweep"), 1)


def test_array_script_golden_and_bash_n(hpc_home):
    script = _render_golden_sweep()
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --array=0-1%1\n" in script
    assert "#SBATCH --output=/runs/golden-sweep/logs/job.%A_%a.out\n" in script
    path = GOLDEN / "sweep-dev-slurm-1n1g.sweep.sh"  # not *.sbatch: test_golden re-renders those
    if UPDATE:
        path.write_text(script, encoding="utf-8")
    assert script == path.read_text(encoding="utf-8"), (
        "the sweep's array script differs from its golden copy; if intended: UPDATE_GOLDENS=1 pytest "
        "tests/unit/test_sweeps.py")


def test_dry_run_writes_one_resubmittable_run_directory_per_element(hpclaunch, hpc_home):
    result = hpclaunch("submit", "allreduce", "--profile", "dev-slurm", "--layout", "1n1g", "--sweep",
                       "train.lr=1e-4,3e-4", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["job_id"] is None and len(info["elements"]) == 2
    from hpclaunch.config.jobspec import load_jobspec

    for element, lr in zip(info["elements"], (1e-4, 3e-4), strict=True):
        spec = load_jobspec(Path(element["run_dir"]) / "resolved.yaml")
        assert spec.recipe.train.lr == lr
        assert spec.recipe_dir == str(Path(element["run_dir"]) / "recipe")
    sweep_dir = Path(info["sweep_dir"])
    assert json.loads((sweep_dir / "sweep.json").read_text())["keys"] == ["train.lr"]
    assert not list(sweep_dir.parent.glob(".*partial"))
    assert registry.all_records() == []  # a dry run records nothing


# --- the local scheduler, K at a time: each element's job script is replaced by a tiny one


def _local_sweep(hpclaunch, values: str, max_parallel: int | None) -> dict:
    args = ["submit", "allreduce", "--profile", "local", "--sweep", f"train.lr={values}", "--dry-run", "--json"]
    result = hpclaunch(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _stamp_scripts(info: dict, seconds: float) -> None:
    for element in info["elements"]:
        script = Path(element["run_dir"]) / "job.sbatch"
        script.write_text(f'#!/bin/bash\necho "start $(date +%s.%N) $HPCLAUNCH_JOB_ID" >> stamps\n'
                          f'sleep {seconds}\necho "end $(date +%s.%N)" >> stamps\n')


def _submit_local(info: dict, max_parallel: int | None) -> tuple[str, list[str]]:
    from hpclaunch.schedulers.local import LocalScheduler

    sweep_dir = Path(info["sweep_dir"])
    job_id = LocalScheduler().submit_array(sweep_dir / "sweep.sbatch", sweep_dir, len(info["elements"]), max_parallel)
    ids = [f"{job_id}_{e['index']}" for e in info["elements"]]
    for element, eid in zip(info["elements"], ids, strict=True):
        registry.add(registry.JobRecord(eid, "local", "local", "allreduce", None, "torchrun", "1n2g", "allreduce",
                                        element["run_dir"], "2026-11-23T00:00:00+0000",
                                        {"id": job_id, "index": element["index"], "values": element["values"]}))
    registry.add(registry.JobRecord(job_id, "local", "local", "allreduce", None, "torchrun", "1n2g", "allreduce",
                                    str(sweep_dir), "2026-11-23T00:00:00+0000",
                                    {"id": job_id, "keys": ["train.lr"], "max_parallel": max_parallel,
                                     "elements": ids}))
    return job_id, ids


def _wait(job_id: str, timeout: float = 30) -> None:
    from hpclaunch.schedulers.local import LocalScheduler

    deadline = time.time() + timeout
    while time.time() < deadline:
        if LocalScheduler().status([job_id])[job_id].finished:
            return
        time.sleep(0.1)
    raise AssertionError(f"sweep {job_id} did not end in {timeout}s")


def _times(info: dict) -> list[tuple[float, float, str]]:
    out = []
    for element in info["elements"]:
        lines = (Path(element["run_dir"]) / "stamps").read_text().split("\n")
        start, end = lines[0].split(), lines[1].split()
        out.append((float(start[1]), float(end[1]), start[2]))
    return out


def test_local_runs_the_elements_k_at_a_time_in_order(hpclaunch, hpc_home):
    info = _local_sweep(hpclaunch, "1,2,3,4", 2)
    _stamp_scripts(info, 0.6)
    job_id, ids = _submit_local(info, 2)
    _wait(job_id)
    times = _times(info)
    assert [t[2] for t in times] == ids  # each element ran as its own job: HPCLAUNCH_JOB_ID local-N_i
    for at in sorted({t for start, end, _ in times for t in (start, end - 0.01)}):
        running = sum(1 for start, end, _ in times if start <= at < end)
        assert running <= 2
    assert times[2][0] >= min(times[0][1], times[1][1]) - 0.05  # the third waits for a free slot
    assert max(times[0][0], times[1][0]) <= min(times[2][0], times[3][0])  # in order: 0 and 1 first
    from hpclaunch.schedulers.local import LocalScheduler

    found = LocalScheduler().status([job_id, *ids])
    assert {s.state for s in found.values()} == {"COMPLETED"}
    for element, eid in zip(info["elements"], ids, strict=True):
        assert (Path(element["run_dir"]) / "logs" / f"job.{eid}.out").is_file()


def test_local_max_parallel_1_never_overlaps(hpclaunch, hpc_home):
    info = _local_sweep(hpclaunch, "1,2,3", 1)
    _stamp_scripts(info, 0.3)
    job_id, _ = _submit_local(info, 1)
    _wait(job_id)
    times = sorted(_times(info))
    assert all(times[i][1] <= times[i + 1][0] for i in range(len(times) - 1))


def test_jobs_and_status_show_the_sweep_as_one_line_with_its_elements(hpclaunch, hpc_home):
    info = _local_sweep(hpclaunch, "1e-4,3e-4", 1)
    _stamp_scripts(info, 0.1)
    for element, loss in zip(info["elements"], (2.0, 1.5), strict=True):
        metrics = Path(element["run_dir"]) / "metrics" / "rank-0.jsonl"
        metrics.write_text("".join(json.dumps({"kind": "train", "step": s, "loss": loss - 0.1 * s, "lr": 0.1})
                                   + "\n" for s in range(1, 4)))
    job_id, ids = _submit_local(info, 1)
    _wait(job_id)
    result = hpclaunch("jobs")
    lines = result.stdout.splitlines()
    assert lines[1].startswith(f"{job_id}\tallreduce sweep train.lr\t")
    assert "COMPLETED (2 elements: 2 COMPLETED)" in lines[1]
    assert lines[2].startswith(f"  {ids[0]}\ttrain.lr=1e-4\t") and lines[3].startswith(f"  {ids[1]}\ttrain.lr=3e-4\t")
    data = json.loads(hpclaunch("jobs", "--json").stdout)
    assert len(data) == 1 and [e["job_id"] for e in data[0]["elements"]] == ids
    assert data[0]["elements"][1]["sweep"]["values"] == {"train.lr": "3e-4"}
    status = hpclaunch("status", job_id).stdout
    assert f"sweep {job_id}  COMPLETED" in status and f"{ids[1]}  train.lr=3e-4  COMPLETED" in status
    assert f"sweep {job_id}, element 0: train.lr=1e-4" in hpclaunch("status", ids[0]).stdout

    report = hpclaunch("report", job_id, "--json")
    assert report.exit_code == 0, report.output
    rep = json.loads(report.stdout)
    assert [e["values"] for e in rep["elements"]] == ["train.lr=1e-4", "train.lr=3e-4"]
    loss_png = next(p for p in rep["plots"] if p.endswith("loss.png"))
    from PIL import Image

    plotted = json.loads(Image.open(loss_png).info["Description"])
    assert set(plotted) == {"train.lr=1e-4", "train.lr=3e-4"}  # one line per value, the legend names it
    compare = json.loads(hpclaunch("compare", job_id, "--json").stdout)
    assert compare["max_abs_diff"] == pytest.approx(0.5)
    assert hpclaunch("compare", job_id, "--tolerance", "0.1").exit_code == 1


def test_cancel_a_local_sweep_stops_running_and_waiting_elements(hpclaunch, hpc_home):
    info = _local_sweep(hpclaunch, "1,2,3", 1)
    _stamp_scripts(info, 30)
    job_id, ids = _submit_local(info, 1)
    from hpclaunch.schedulers.local import LocalScheduler

    deadline = time.time() + 10
    while LocalScheduler().status([ids[0]])[ids[0]].state != "RUNNING" and time.time() < deadline:
        time.sleep(0.1)
    assert LocalScheduler().status([ids[1]])[ids[1]].state == "PENDING"
    assert hpclaunch("cancel", job_id).exit_code == 0
    found = LocalScheduler().status([job_id, *ids])
    assert {s.state for s in found.values()} == {"CANCELLED"}
