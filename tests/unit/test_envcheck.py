"""The runtime's package floors: said once (hpclaunch/config/requirements.py), the same in pyproject.toml, checked
before a rank starts its script, and sinfo's GRES read for `profiles check`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

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


def _old_transformers(prefix: Path) -> Path:
    """An environment holding transformers 4.46.0 (seed 002's pin): its real package metadata, as pip leaves it."""
    dist = prefix / "lib" / f"python3.{sys.version_info.minor}" / "site-packages" / "transformers-4.46.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 4.46.0\n")
    return dist.parent


def test_a_rank_checks_only_what_its_job_needs(tmp_path: Path) -> None:
    """requires.json (written at submit) says what the job needs: a user's own script ({}) runs in seed 002's
    environment; a recipe that trains through transformers stops at once."""
    site = _old_transformers(tmp_path / "env")
    script = tmp_path / "train.py"
    script.write_text("print('the script ran')\n")
    for needed, code in (({}, 0), ({"transformers": "4.56"}, 2)):
        run = tmp_path / f"run-{code}"
        run.mkdir()
        (run / "requires.json").write_text(json.dumps(needed))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "HPCLAUNCH_RUN_DIR": str(run),
               "HPCLAUNCH_LOG_DIR": str(run / "logs")}
        proc = subprocess.run([sys.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(script)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert ("the script ran" in proc.stdout) == (code == 0), proc.stdout


def test_submit_refuses_a_recipe_whose_environment_is_too_old_and_runs_your_own_script_in_it(hpclaunch, tmp_path):
    """Preflight reads the job's environment's package metadata (no import) before queueing."""
    env = tmp_path / "env"
    _old_transformers(env)
    (env / "bin").mkdir()
    (env / "bin" / "activate").write_text("# a venv's activate\n")
    profile = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    profile["python"] = {"venv": str(env)}
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(profile))
    recipe = hpclaunch("submit", str(REPO / "recipes" / "gpt2"), "--profile", str(tmp_path / "old.yaml"),
                       "--preset", "tiny")
    assert recipe.exit_code == 2, recipe.output
    assert f"the job's python environment {env} is too old for recipe gpt2: transformers 4.46.0 (needs >= 4.56)" \
        in recipe.stderr
    assert f"{env}/bin/pip install 'transformers>=4.56'" in recipe.stderr and "Traceback" not in recipe.output
    runs = Path(os.environ["HPCLAUNCH_HOME"]) / "runs"
    assert not runs.exists() or not list(runs.iterdir())  # nothing half-written
    own = tmp_path / "mine.py"
    own.write_text("import sys; print(sys.version)\n")
    mine = hpclaunch("submit", str(own), "--profile", str(tmp_path / "old.yaml"), "--dry-run")
    assert mine.exit_code == 0 and "too old" not in mine.output, mine.output
