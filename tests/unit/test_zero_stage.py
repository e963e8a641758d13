"""A DeepSpeed job on one rank runs ZeRO stage 0 (JobSpec.zero_stage): what ds_config.json asks for, what the
dry run and the memory plan say; the recipe's stage on more ranks, and with offload (which needs ZeRO)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO


def _stage(hpclaunch, *flags: str) -> int:
    r = hpclaunch("submit", str(REPO / "recipes" / "bert_large"), "--profile", "local", "--preset", "tiny",
                  *flags, "--dry-run")
    assert r.exit_code == 0, r.output
    run_dir = Path(re.search(r"run directory (\S+)", r.stderr).group(1))  # type: ignore[union-attr]
    config = json.loads((run_dir / "ds_config.json").read_text())
    plan = hpclaunch("plan", str(REPO / "recipes" / "bert_large"), "--profile", "local", "--preset", "tiny",
                     *flags, "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout.splitlines()[-1])["zero_stage"] == config["zero_optimization"]["stage"]
    return config["zero_optimization"]["stage"]


@pytest.mark.parametrize("flags,stage", [
    (("--layout", "1n1g"), 0),  # one rank: nothing to partition over
    (("--layout", "1n2g"), 3),  # the recipe's ZeRO-3
    (("--layout", "1n1g", "--set", "deepspeed.offload_optimizer=true"), 3),  # offload keeps ZeRO
    (("--layout", "1n2g", "--set", "deepspeed.zero_stage=1"), 1),
])
def test_the_zero_stage_follows_the_world_size(hpclaunch, flags: tuple[str, ...], stage: int) -> None:
    assert _stage(hpclaunch, *flags) == stage
