"""The runtime's package floors: said once (hpclaunch/config/requirements.py), the same in pyproject.toml, checked
before a rank starts its script, and sinfo's GRES read for `profiles check`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from hpclaunch.config.requirements import FLOORS
from hpclaunch.runtime.node.envcheck import too_old, version_tuple
from hpclaunch.schedulers.slurm.checks import gres_count, parse_sinfo

REPO = Path(__file__).resolve().parents[2]


def test_pyproject_states_the_same_floors() -> None:
    text = (REPO / "pyproject.toml").read_text()
    stated = dict(re.findall(r'"(torch|transformers|datasets|deepspeed|accelerate|mindspore)>=([\d.]+)"', text))
    assert stated == FLOORS


def test_versions_compare_by_release_numbers() -> None:
    assert version_tuple("2.13.0+cpu") == (2, 13, 0) and version_tuple("0.19.8rc1") == (0, 19, 8)
    assert version_tuple("4.46.0") < version_tuple("4.56") <= version_tuple("4.56.0") < version_tuple("5.23.0")


def test_the_installed_stack_is_new_enough() -> None:
    assert too_old() == []


def test_a_rank_with_a_too_old_package_stops_before_its_script(tmp_path: Path) -> None:
    """transformers 4.46.0 (the version seed 002's author pins) fails inside the job with an unexpected keyword
    `dtype`; the rank now ends at once naming the package, the version found and the version needed."""
    site = tmp_path / "site"
    dist = site / "transformers-4.46.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 4.46.0\n")
    script = tmp_path / "train.py"
    script.write_text("print('the script ran')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "HPCLAUNCH_LOG_DIR": str(tmp_path)}
    env.pop("HPCLAUNCH_RUN_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the script ran" not in proc.stdout
    assert ("[rank0]: hpclaunch: error: transformers 4.46.0 is installed; hpclaunch needs transformers >= 4.56"
            in proc.stdout)
    assert "transformers 4.46.0" in (tmp_path / "rank-0.restart-0.log").read_text()


def test_sinfo_partitions_and_gres() -> None:
    text = ("debug*|gpu:4|4|4000|2:00:00|4\n"
            "big|gpu:a100:8(S:0-1),shard:16|64|512000|2-00:00:00|2\n"
            "big|(null)|64|512000|2-00:00:00|1\n")
    found = parse_sinfo(text)
    assert set(found) == {"debug", "big"} and len(found["big"]) == 2
    assert gres_count(found["big"][0]["gres"], "gpu") == 8 and gres_count("(null)", "gpu") == 0
    assert gres_count("gpu:4", "gpu") == 4 and gres_count("gpu:4", "npu") == 0
