"""The bundled recipes' `full` presets render (dry run) for the real clusters with the right
launcher, device variables, collective backend and precision."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROFILES = {  # profile -> (layout, accelerator, backend, visible-devices variable, precision)
    "guangzhou-a800": ("2n8g", "cuda", "nccl", "CUDA_VISIBLE_DEVICES", "bf16"),
    "cngrid12-v100": ("2n4g", "cuda", "nccl", "CUDA_VISIBLE_DEVICES", "fp16"),
    "musa-s4000": ("2n8g", "musa", "mccl", "MUSA_VISIBLE_DEVICES", "bf16"),
}
LAUNCHERS = {"gpt2": "torchrun", "bert_large": "deepspeed", "mixtral": "deepspeed"}


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("recipe", sorted(LAUNCHERS))
def test_full_preset_renders(hpclaunch, hpc_home, recipe, profile):
    layout, accelerator, backend, visible, precision = PROFILES[profile]
    if (LAUNCHERS[recipe], accelerator) == ("deepspeed", "musa"):  # refused before anything is rendered
        refused = hpclaunch("submit", str(REPO / "recipes" / recipe), "--profile", profile, "--preset", "full",
                            "--layout", layout, "--dry-run")
        assert refused.exit_code == 2 and "DeepSpeed has no MUSA accelerator" in refused.stderr, refused.output
        assert not (hpc_home / "runs").exists() or not any((hpc_home / "runs").iterdir())
        return
    result = hpclaunch(
        "submit",
        str(REPO / "recipes" / recipe),
        "--profile",
        profile,
        "--preset",
        "full",
        "--layout",
        layout,
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    run_dir = Path(re.search(r"# dry run: nothing submitted; run directory (\S+)", result.output).group(1))
    script = (run_dir / "job.sbatch").read_text()
    assert f"export HPCLAUNCH_ACCELERATOR={accelerator}" in script
    assert f"export HPCLAUNCH_BACKEND={backend}" in script
    assert f"export {visible}=" in script
    assert "HF_HUB_OFFLINE=1" in script
    if LAUNCHERS[recipe] == "torchrun":  # launch.agent auto: the node supervisor starts each node's ranks
        assert f"--ranks=2:{layout[2]} -- " in script
    else:
        assert "--nnodes=2" in script and f"--nproc-per-node={layout[2]}" in script
    assert f"{run_dir}/recipe/train.py --config {run_dir}/resolved.yaml" in script
    if LAUNCHERS[recipe] == "deepspeed":
        assert f"--deepspeed_config {run_dir}/ds_config.json" in script
        ds = json.loads((run_dir / "ds_config.json").read_text())
        assert ds["zero_optimization"]["stage"] == 3
        assert ds["bf16"]["enabled"] == (precision == "bf16") and ds["fp16"]["enabled"] == (
            precision == "fp16"
        )
    else:
        assert "--deepspeed_config" not in script and not (run_dir / "ds_config.json").exists()
    resolved = (run_dir / "resolved.yaml").read_text()
    assert f"launcher: {LAUNCHERS[recipe]}" in resolved
