"""The memory plan's model states against what the engine really holds (issue 9, section 3).

GPT-2 tiny on the `local` profile, 2 ranks (real torchrun / deepspeed processes on the CPU), one optimizer
step under DDP and ZeRO-1/2/3 with and without optimizer offload. After its first step each rank records the
bytes of the parameters (its shards), gradients (its partition) and optimizer states (fp32 master copies and
AdamW moments) it holds (hpclaunch/runtime/train/held.py, metrics kind "states"). On the CPU the host is the device,
so what the plan moves to the host under offload is added back before comparing: the plan's bytes per rank
must equal the measured bytes within 5 %.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICK = ("--set", "train.max_steps=1", "--set", "train.log_every=1", "--set", "train.save_every=0",
         "--set", "train.eval_steps=1")
DS = ("--set", "launcher=deepspeed")
CASES = {
    "ddp": (),
    "zero1": (*DS, "--set", "deepspeed.zero_stage=1"),
    "zero2": (*DS, "--set", "deepspeed.zero_stage=2"),
    "zero3": (*DS, "--set", "deepspeed.zero_stage=3"),
    "zero1-offload": (*DS, "--set", "deepspeed.zero_stage=1", "--set", "deepspeed.offload_optimizer=true"),
    "zero2-offload": (*DS, "--set", "deepspeed.zero_stage=2", "--set", "deepspeed.offload_optimizer=true"),
    "zero3-offload": (*DS, "--set", "deepspeed.zero_stage=3", "--set", "deepspeed.offload_optimizer=true"),
}


def _submit(home: Path, *sets: str) -> Path:
    cmd = [sys.executable, "-m", "hpclaunch.cli.main", "submit", str(REPO / "recipes" / "gpt2"), "--profile", "local",
           "--preset", "tiny", *QUICK, *sets, "--follow"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HPCLAUNCH_HOME": str(home)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    assert found, proc.stdout
    return Path(found.group(1))


def _planned(*sets: str) -> tuple[float, float]:
    """(model states per rank on the device, bytes per rank offloaded to the host) of the plan."""
    from hpclaunch.plan import plan_job
    from hpclaunch.submission.resolve import CliOverrides, resolve

    pairs = tuple(w for w in QUICK + sets if w != "--set")  # the KEY=VALUE words
    plan = plan_job(resolve("gpt2", "local", CliOverrides(preset="tiny", sets=pairs)))
    return plan.estimate.model_states, plan.estimate.host_per_node / plan.setup.gpus_per_node


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hpclaunch-home")


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_plan_model_states_equal_the_bytes_each_rank_holds(home: Path, case: str) -> None:
    run_dir = _submit(home, *CASES[case])
    device, host = _planned(*CASES[case])
    assert (host > 0) == case.endswith("offload")
    for rank in range(2):
        lines = (run_dir / "metrics" / f"rank-{rank}.jsonl").read_text().splitlines()
        (held,) = [r for r in map(json.loads, lines) if r["kind"] == "states"]
        assert held["world_size"] == 2
        measured = held["param_bytes"] + held["grad_bytes"] + held["optimizer_bytes"]
        assert measured == pytest.approx(device + host, rel=0.05), (case, rank, held, device, host)
