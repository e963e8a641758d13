"""A generated model's random-init weights, built in a child process (once per store, by rank 0):

    python -m hpclaunch.runtime.train.generate_model OUT TASK SEED

OUT holds the model's config.json (written by the rank); the child seeds torch with SEED, builds the model from that
config (the Auto class of TASK) and saves it into OUT. Why a child: transformers' save_pretrained asks accelerate to
unwrap the model, and accelerate imports DeepSpeed whenever it is installed — a second of CPU and DeepSpeed's
accelerator warning in the log of a torchrun rank that never uses it (docs/benchmarks.md#rank-start-up).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.errors import AssetError

if TYPE_CHECKING:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, PreTrainedConfig

TIMEOUT = 3600.0  # seconds: a GPT-2 124M builds in about ten on a CPU; a shared filesystem may be slow


def auto_class(task: str) -> type[AutoModelForCausalLM] | type[AutoModelForMaskedLM]:
    """The Auto class that builds a model for the recipe's task."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    return AutoModelForMaskedLM if task == "masked-lm" else AutoModelForCausalLM


def build_in_child(config: PreTrainedConfig, task: str, seed: int, out: Path) -> None:
    """The model of `config` with weights from torch.manual_seed(seed), saved into `out` by a child Python; an
    AssetError with the child's last lines when it fails."""
    config.save_pretrained(out)
    cmd = [sys.executable, "-m", __name__, str(out), task, str(seed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise AssetError(f"building the generated model in {out} took over {TIMEOUT:g} s",
                         hint=f"run `{' '.join(cmd)}` by hand to see where it stops") from e
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise AssetError(f"building the generated model in {out} failed (exit code {proc.returncode}):\n{tail}",
                         hint=f"run `{' '.join(cmd)}` by hand to see the whole error")


def main(argv: list[str]) -> int:
    out, task, seed = Path(argv[0]), argv[1], int(argv[2])
    import torch
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(out)
    torch.manual_seed(seed)
    auto_class(task).from_config(config).save_pretrained(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
