"""Energy and cost (hpclaunch/report/energy.py): `report` and `compare` on run directories whose usage samples hold
recorded power lines (the npu-smi stand-in answers with tests/fixtures/device-tools/npu-smi-info.910b3.txt:
121.6 ... 119.9 W), and on a CPU-only run (no power samples: said, not 0 kWh); device-hours from the layout and
the elapsed time the local scheduler measured; a cost from the partition's cost_per_device_hour; --json with the
same numbers; a sweep's rows and total."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from hpclaunch.report import energy
from hpclaunch.runtime.node import sampler
from tests.fixtures.jobrecords import start_local_job, wait_local
from tests.unit.test_report_metrics import write_metrics
from tests.unit.test_sampler_devices import FAKE, _path

REPO = Path(__file__).resolve().parents[2]
NPU_W = [121.6, 116.4, 116.6, 123.2, 121.4, 126.1, 122.4, 119.9]  # the recorded 910B3 table's Power(W)


def _priced_profile(hpc_home: Path, cost: float | None) -> None:
    """A user profile named `local` (found before the bundled one) with a price per device-hour."""
    data = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    if cost is not None:
        data["partitions"]["local"]["cost_per_device_hour"] = cost
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "hpclaunch" / "cluster_profiles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "local.yaml").write_text(yaml.safe_dump(data))


def _run(hpclaunch: Callable[..., Result], tool: str | None, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A finished local job (1n2g, a second or two) with 5 steps of metrics and two usage samples taken with
    `tool`'s stand-in on PATH (None: no device tool, a CPU node)."""
    job, run = start_local_job(hpclaunch, "sleep 1.5")
    assert wait_local(job, timeout=60) == "COMPLETED"
    write_metrics(run, [4.0, 3.5, 3.0, 2.5, 2.0])
    with monkeypatch.context() as m:
        m.setenv("PATH", _path(*([FAKE[tool]] if tool else [])))
        node = sampler.Sampler(run / "usage" / "node-0.restart-0.jsonl", "0", lambda: [os.getpid()], 30.0)
        node.sample(1000.0)
        node.sample(1030.0, ended=True)
    return job, run


def _json(hpclaunch: Callable[..., Result], *args: str) -> dict[str, Any]:
    result = hpclaunch(*args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_report_energy_from_recorded_power_lines_and_the_cost(hpc_home: Path, hpclaunch: Callable[..., Result],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _priced_profile(hpc_home, 2.5)
    job, run = _run(hpclaunch, "npu-smi", monkeypatch)
    samples = [json.loads(line) for line in (run / "usage" / "node-0.restart-0.jsonl").read_text().splitlines()]
    assert [d["power_w"] for d in samples[0]["devices"]] == NPU_W

    e = _json(hpclaunch, "report", job)["energy"]
    elapsed = e["elapsed_s"]
    assert elapsed and e["devices"] == 2 and e["device_hours"] == pytest.approx(2 * elapsed / 3600, abs=1e-6)
    assert e["energy_source"] == "samples" and e["devices_sampled"] == 8 and e["power_samples"] == 16
    assert e["energy_kwh"] == pytest.approx(sum(NPU_W) * elapsed / 3.6e6, abs=1e-6)
    assert e["mean_power_w"] == pytest.approx(sum(NPU_W) / 8, abs=0.01)
    assert e["cost_per_device_hour"] == 2.5 and e["cost"] == pytest.approx(e["device_hours"] * 2.5, abs=1e-4)
    tokens = 5 * 16 * 128  # 5 steps x global batch 16 (micro-batch 8 on 2 ranks) x seq_len 128: the resolved.yaml
    spec = yaml.safe_load((run / "resolved.yaml").read_text())
    assert spec["global_batch_size"] * spec["recipe"]["train"]["seq_len"] * 5 == tokens
    assert e["tokens_per_kwh"] == pytest.approx(tokens / e["energy_kwh"], rel=1e-3)

    text = hpclaunch("report", job).stdout
    hours, kwh, cost = energy.cells(e)
    assert f"device-hours: {hours} (2 devices x " in text
    assert f"energy: {kwh} (16 power samples of 8 devices, {e['mean_power_w']:g} W mean)" in text
    assert f"cost: {cost} (2.5 per device-hour)" in text
    assert all(line in text.splitlines() and len(line) <= 80 for line in energy.describe(e))


def test_a_cpu_only_run_says_the_energy_is_not_known(hpc_home: Path, hpclaunch: Callable[..., Result],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _priced_profile(hpc_home, None)
    job, _ = _run(hpclaunch, None, monkeypatch)
    e = _json(hpclaunch, "report", job)["energy"]
    assert e["energy_kwh"] is None and e["energy_source"] is None and e["tokens_per_kwh"] is None
    assert e["cost"] is None and e["device_hours"] > 0
    text = hpclaunch("report", job).stdout
    assert "energy: not known" in text and "0 kWh" not in text
    assert "note: no power samples: no device tool (CPU only)" in text
    assert "note: no cost: the partition gives no cost_per_device_hour" in text


def test_compare_shows_tokens_per_kwh_of_both_runs(hpc_home: Path, hpclaunch: Callable[..., Result],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _priced_profile(hpc_home, 1.0)
    npu, _ = _run(hpclaunch, "npu-smi", monkeypatch)
    monkeypatch.setenv("FAKE_GPU_POWER_W", "400")
    gpu, _ = _run(hpclaunch, "nvidia-smi", monkeypatch)
    data = _json(hpclaunch, "compare", npu, gpu)["energy"]
    a, b = data["a"], data["b"]
    assert (a["job"], b["job"]) == (npu, gpu)
    assert b["power_samples"] == 4 and b["mean_power_w"] == 400.0  # the stand-in's two GPUs, twice
    assert b["energy_kwh"] == pytest.approx(2 * 400 * b["elapsed_s"] / 3.6e6, abs=1e-6)
    for e in (a, b):
        assert e["tokens"] == 5 * 16 * 128 and e["tokens_per_kwh"] == pytest.approx(e["tokens"] / e["energy_kwh"],
                                                                                     rel=1e-3)
    text = hpclaunch("compare", npu, gpu).stdout
    assert f"tokens per kWh: {npu} {a['tokens_per_kwh']:.4g}, {gpu} {b['tokens_per_kwh']:.4g}" in text
    assert f"device-hours: {npu} {energy.cells(a)[0]}, {gpu} {energy.cells(b)[0]}" in text
    assert f"cost: {npu} {energy.cells(a)[2]}, {gpu} {energy.cells(b)[2]}" in text


def test_sweep_totals_sum_only_what_every_element_has() -> None:
    one = {"device_hours": 0.5, "energy_kwh": 0.2, "cost": 1.0}
    assert energy.total([one, one]) == {"device_hours": 1.0, "energy_kwh": 0.4, "cost": 2.0, "elements": 2}
    assert energy.total([one, {**one, "energy_kwh": None}])["energy_kwh"] is None  # not known, not a part sum
    assert energy.cells({"device_hours": None, "energy_kwh": None, "cost": None}) == ("-", "not known", "-")


def test_sacct_consumed_energy_zero_is_not_recorded() -> None:
    e = energy.of_job([], elapsed_s=3600, devices=4, cost_per_device_hour=None, consumed_energy_j=0)
    assert e["energy_kwh"] is None and e["sacct_energy_kwh"] is None and e["device_hours"] == 4
    assert "Slurm's ConsumedEnergy is 0 here: not recorded" in e["notes"]
    recorded = energy.of_job([], elapsed_s=3600, devices=4, cost_per_device_hour=3, consumed_energy_j=7.2e6)
    assert (recorded["energy_kwh"], recorded["energy_source"], recorded["cost"]) == (2.0, "sacct", 12.0)
    assert "energy: 2 kWh (Slurm ConsumedEnergy, the nodes')" in energy.describe(recorded)


def make_sweep(hpclaunch: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, hpc_home: Path) -> tuple[str, list]:
    """Two finished local jobs (npu-smi's recorded power lines; the second with no device tool) recorded as the
    elements of a sweep over train.lr, as `submit --sweep` records them."""
    from dataclasses import replace

    from hpclaunch.state import registry

    sweep_id, ids = "local-900", []
    for index, (tool, lr) in enumerate((("npu-smi", "1e-3"), (None, "2e-3"))):
        job, _ = _run(hpclaunch, tool, monkeypatch)
        registry.add(replace(registry.get(job), sweep={"id": sweep_id, "index": index, "values": {"train.lr": lr}}))
        ids.append(job)
    folder = hpc_home / "sweep-900"
    folder.mkdir()
    registry.add(registry.JobRecord(sweep_id, "local", "local", "allreduce", None, "torchrun", "1n2g", "allreduce",
                                    str(folder), "2026-11-25T07:00:00+0000",
                                    {"id": sweep_id, "keys": ["train.lr"], "max_parallel": None, "elements": ids}))
    return sweep_id, ids


def test_a_sweeps_report_has_each_elements_energy_and_the_total(hpc_home: Path, hpclaunch: Callable[..., Result],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _priced_profile(hpc_home, 2.5)
    sweep, ids = make_sweep(hpclaunch, monkeypatch, hpc_home)
    data = _json(hpclaunch, "report", sweep)
    first, second = (e["energy"] for e in data["elements"])
    assert first["energy_source"] == "samples" and second["energy_kwh"] is None
    assert data["energy"]["device_hours"] == pytest.approx(first["device_hours"] + second["device_hours"], abs=1e-5)
    assert data["energy"]["cost"] == pytest.approx(first["cost"] + second["cost"], abs=1e-3)
    assert data["energy"]["energy_kwh"] is None  # one element's energy is not known: no total of a part
    text = hpclaunch("report", sweep).stdout  # piped: the table as tab-separated lines
    assert f"{ids[0]}\t{energy.cells(first)[0]}\t{energy.cells(first)[1]}\t{energy.cells(first)[2]}" in text
    assert f"total\t{energy.cells(data['energy'])[0]}\tnot known\t{energy.cells(data['energy'])[2]}" in text
    assert "note: no power samples: no device tool (CPU only)" in text


# `sacct --parsable2 --format=accounting.SACCT_FIELDS --jobs=557` on the dev cluster (no energy gathering: 0 J)
SACCT_557 = """JobID|State|ElapsedRaw|TimelimitRaw|TotalCPU|AllocCPUS|MaxRSS|ReqMem|NNodes|ConsumedEnergyRaw
557|COMPLETED|9|20|00:12.583|3||3G|3|0
557.batch|COMPLETED|9||00:00.243|1|12516K||1|0
557.0|COMPLETED|3||00:03.480|3|247484K||3|0
557.1|COMPLETED|6||00:08.859|2|573116K||2|0
"""


def test_the_dev_clusters_sacct_records_no_energy() -> None:
    from hpclaunch.report import usage
    from hpclaunch.schedulers.slurm import accounting

    measured = accounting.from_sacct(SACCT_557, "557")
    assert measured is not None and measured["consumed_energy_j"] == 0
    used = usage.summarize(**measured)
    e = energy.of_job([], elapsed_s=used["elapsed_s"], devices=12, cost_per_device_hour=2.0,
                      consumed_energy_j=used["consumed_energy_j"])
    assert e["energy_kwh"] is None and e["device_hours"] == pytest.approx(12 * 9 / 3600)
    assert e["cost"] == pytest.approx(0.06) and "Slurm's ConsumedEnergy is 0 here: not recorded" in e["notes"]
    recorded = SACCT_557.replace("|3|0\n557.batch", "|3|5400000\n557.batch")  # a site that gathers energy
    assert accounting.from_sacct(recorded, "557")["consumed_energy_j"] == 5400000
    older = "\n".join(line.rsplit("|", 1)[0] for line in SACCT_557.splitlines())  # a sacct not asked for it
    assert accounting.from_sacct(older, "557")["consumed_energy_j"] is None
