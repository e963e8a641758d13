"""The oldest versions of the job's packages that hpclaunch's runtime works with, and which packages the bundled
recipes import. pyproject.toml's extras say the same floors (tests/unit/test_envcheck.py holds them equal); the job
checks them before a rank starts (hpclaunch/runtime/node/envcheck.py), `profiles check --on-node` on a node.
Standard library only."""

from __future__ import annotations

import re

# package -> the oldest version the runtime works with (transformers: `from_pretrained(dtype=...)` came in 4.56;
# torch: `torch.distributed.tensor.DTensor` is public from 2.5; deepspeed 0.14 fails to import on torch >= 2.4,
# `from torch.distributed.elastic.agent.server.api import log`: found installing the floors with uv's
# --resolution lowest-direct, issue 22)
FLOORS: dict[str, str] = {
    "torch": "2.5",
    "transformers": "4.56",
    "datasets": "2.19",
    "deepspeed": "0.15",
    "accelerate": "0.30",
    "mindspore": "2.3",
}
TORCH_STACK = ("torch", "transformers", "datasets", "deepspeed")  # what the bundled torch recipes import
MINDSPORE_STACK = ("mindspore",)
#: a runtime recipe's packages by launcher (its script trains through hpclaunch/runtime/train: the floors above)
RUNTIME_STACKS = {"torchrun": ("torch", "transformers", "datasets"), "deepspeed": TORCH_STACK,
                  "msrun": MINDSPORE_STACK}


def version_tuple(text: str) -> tuple[int, ...]:
    """``2.13.0+cpu`` -> (2, 13, 0); ``0.19.8rc1`` -> (0, 19, 8): the release numbers only."""
    out = []
    for part in text.split("+")[0].split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def needed_by(launcher: str, own_script: bool) -> dict[str, str]:
    """The packages (and their floors) a job's environment must hold: a recipe that trains through hpclaunch's
    runtime needs its launcher's stack at the floors; a user's own script (`submit SCRIPT.py`, a recipe of task
    test) needs none of them: it runs under the standard-library supervisor with whatever torch the site's module
    or conda env provides, and its own imports say what it needs."""
    if own_script:
        return {}
    return {name: FLOORS[name] for name in RUNTIME_STACKS.get(launcher, ())}
