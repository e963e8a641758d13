"""On the dev Slurm cluster (CPU nodes, fake GPUs, accounting on but no energy gathering): a sweep of two tiny
GPT-2 runs on a profile that prices a device-hour. `report` of the sweep and of an element, and `compare` of
the two elements, print the device-hours and cost rows (devices of the layout x sacct's elapsed time x the
price); the energy is said to be not known (no power samples on CPU nodes; sacct's ConsumedEnergy is 0 here:
not recorded), never 0 kWh; --json has the same numbers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from hpclaunch.report import energy
from tests.integration.test_sweeps import SHORT, cli

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PRICE = 1.75


def test_report_and_compare_show_device_hours_and_cost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = yaml.safe_load((REPO / "cluster_profiles" / "dev-slurm.yaml").read_text())
    data["partitions"]["debug"]["cost_per_device_hour"] = PRICE
    profile = tmp_path / "dev-slurm.yaml"
    profile.write_text(yaml.safe_dump(data))
    proc = cli(home, "submit", str(REPO / "recipes" / "gpt2"), "--profile", str(profile), "--preset", "tiny",
               "--layout", "1n2g", *SHORT, "--sweep", "train.lr=2e-3,5e-3", "--follow", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep = proc.stdout.split()[2].rstrip(":")  # "submitted sweep 123: 2 elements ..."

    report = json.loads(cli(home, "report", sweep, "--json").stdout)
    elements = {e["job_id"]: e["energy"] for e in report["elements"]}
    for job, e in elements.items():
        sacct = subprocess.run(["sacct", "-n", "-X", "--parsable2", "--format=ElapsedRaw,ConsumedEnergyRaw",
                                f"--jobs={job}"], capture_output=True, text=True, check=True).stdout
        elapsed, joules = sacct.split()[0].split("|")
        assert joules in ("0", "")  # the dev cluster gathers no energy
        assert e["elapsed_s"] == int(elapsed) and e["devices"] == 2
        assert e["device_hours"] == pytest.approx(2 * int(elapsed) / 3600, abs=1e-6)
        assert e["cost"] == pytest.approx(e["device_hours"] * PRICE, abs=1e-4)
        assert e["energy_kwh"] is None and e["sacct_energy_kwh"] is None
        assert "no power samples: no device tool (CPU only)" in e["notes"]
        assert "Slurm's ConsumedEnergy is 0 here: not recorded" in e["notes"]
    total = report["energy"]
    assert total["cost"] == pytest.approx(sum(e["cost"] for e in elements.values()), abs=1e-3)

    text = cli(home, "report", sweep).stdout
    assert "job\tdevice-hours\tenergy\tcost" in text and "0 kWh" not in text
    a, b = elements
    assert f"{a}\t{energy.cells(elements[a])[0]}\tnot known\t{energy.cells(elements[a])[2]}" in text
    one = cli(home, "report", a).stdout
    assert f"device-hours: {energy.cells(elements[a])[0]} (2 devices x " in one
    assert f"cost: {energy.cells(elements[a])[2]} ({PRICE:g} per device-hour)" in one
    assert "energy: not known" in one

    compared = cli(home, "compare", a, b).stdout
    hours = [energy.cells(elements[j])[0] for j in (a, b)]
    costs = [energy.cells(elements[j])[2] for j in (a, b)]
    assert f"device-hours: {a} {hours[0]}, {b} {hours[1]}" in compared
    assert f"cost: {a} {costs[0]}, {b} {costs[1]}" in compared
    assert f"tokens per kWh: {a} -, {b} -" in compared
    assert json.loads(cli(home, "compare", a, b, "--json").stdout)["energy"]["a"]["cost"] == elements[a]["cost"]
