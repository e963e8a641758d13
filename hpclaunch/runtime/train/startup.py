"""What a rank's start-up cost: CPU seconds from process start and the heavy packages it imported.

The loop writes it once, at the first finished optimizer step, to the rank's metrics:

    {"kind": "startup", "cpu_s", "user_s", "sys_s", "children_cpu_s", "wall_s", "packages": ["numpy", "torch", ...]}

`cpu_s` is user + system time of the rank's own process (its script) from its start; `children_cpu_s` that of the
child processes it started and waited for (rank 0 building a generated model, hpclaunch/runtime/train/generate_model.py;
tokenizer workers are threads, counted in `cpu_s`); `wall_s` the time since the
process started (from /proc/self/stat; null where there is no /proc). `packages`: which of HEAVY the process had
imported by then — a torchrun (DDP) rank lists no `deepspeed`, for instance (docs/benchmarks.md#rank-start-up).
Standard library only.
"""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

#: Packages whose import costs a rank a noticeable share of its start-up (tens of ms to seconds of CPU).
HEAVY = ("accelerate", "datasets", "deepspeed", "mindspore", "numpy", "pandas", "pyarrow", "safetensors", "scipy",
         "sympy", "tensorboard", "tokenizers", "torch", "transformers", "wandb")


def heavy_packages(modules: dict[str, Any] | None = None) -> list[str]:
    """The HEAVY packages imported so far (`modules`: sys.modules)."""
    loaded = sys.modules if modules is None else modules
    return [name for name in HEAVY if name in loaded]


def _process_age() -> float | None:
    """Seconds since this process started, from /proc (field 22 of /proc/self/stat: start time in clock ticks
    after boot), or None where there is no /proc."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the command name may hold spaces: split after it
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 is the 20th after the command name
    return max(0.0, uptime - started)


def usage() -> dict[str, Any]:
    """This process's start-up cost so far (the "startup" metrics record's fields)."""
    self = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    age = _process_age()
    return {
        "cpu_s": round(self.ru_utime + self.ru_stime, 3),
        "user_s": round(self.ru_utime, 3),
        "sys_s": round(self.ru_stime, 3),
        "children_cpu_s": round(children.ru_utime + children.ru_stime, 3),
        "wall_s": None if age is None else round(age, 3),
        "packages": heavy_packages(),
    }
