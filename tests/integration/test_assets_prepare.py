"""`stage-assets --prepare` tokenizes and groups a recipe's dataset into the store ahead of the job;
the job then finds exactly that cache and does not tokenize again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "HPCLAUNCH_HOME": str(home / ".hpclaunch"),
           "XDG_CONFIG_HOME": str(home / ".config"), "HPCLAUNCH_PATH": str(FIXTURES)}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_prepared_data_is_what_the_job_uses(tmp_path):
    out = _cli(tmp_path, "stage-assets", "recipes/gpt2", "--profile", "local", "--preset", "tiny", "--prepare",
               "--json").stdout
    prepared = json.loads(out.strip().splitlines()[-1])["prepared"]
    assert prepared["recipe"] == "gpt2" and prepared["seq_len"] == 128
    assert prepared["blocks"]["train"] > 0 and prepared["blocks"]["validation"] > 0
    caches = list((tmp_path / ".hpclaunch" / "assets" / "generated" / "data").iterdir())
    assert len(caches) == 1
    train = caches[0] / "train.npy"
    before = train.stat().st_mtime_ns

    _cli(tmp_path, "submit", "recipes/gpt2", "--profile", "local", "--preset", "tiny", "--follow",
         "--set", "train.max_steps=2", "--set", "train.log_every=1", "--set", "train.eval_steps=1")
    after = list((tmp_path / ".hpclaunch" / "assets" / "generated" / "data").iterdir())
    assert after == caches and train.stat().st_mtime_ns == before  # found, not rebuilt
