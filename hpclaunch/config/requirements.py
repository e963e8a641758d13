"""The oldest versions of the job's packages that hpclaunch's runtime works with, and which packages the bundled
recipes import. pyproject.toml's extras say the same floors (tests/unit/test_envcheck.py holds them equal); the job
checks them before a rank starts (hpclaunch/runtime/node/envcheck.py), `profiles check --on-node` on a node.
Standard library only."""

from __future__ import annotations

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
