"""Is this Python environment fit to run hpclaunch's recipes? ``python -m hpclaunch.runtime.node.envcheck --json``.

The oldest versions of the job's packages that the runtime works with (hpclaunch/config/requirements.py),
checked two ways:

- `too_old()`: before a rank starts its script (hpclaunch/runtime/node/rank_exec.py) — an installed package the job
  needs (RUN_DIR/requires.json: none for a user's own script) older than its floor ends the rank at once with a
  message naming the package, the version found and the version needed, instead of a TypeError deep inside a
  library call (preflight said it before queueing where it could see the environment: submission/envversions.py).
  A package that is not installed is left to the script. Reads package metadata only: no import, a few milliseconds.
- `report()`: `hpclaunch profiles check --on-node` runs this module on a compute node, inside the profile's modules
  and Python environment: Python, hpclaunch, each package imported for real (a broken install fails here) with its
  version against the floor, and the devices the node shows the job.

Standard library only.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import subprocess
import sys
from typing import Any

from hpclaunch.config.requirements import FLOORS, TORCH_STACK, version_tuple

IMPORT_TIMEOUT = 300.0  # seconds for one package's import on a slow shared filesystem


def installed(package: str) -> str | None:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None


def too_old(packages: tuple[str, ...] = tuple(FLOORS), floors: dict[str, str] = FLOORS) -> list[str]:
    """One line per installed package older than its floor: `transformers 4.46.0 is installed; hpclaunch needs
    transformers >= 4.56`."""
    out = []
    for name in packages:
        found, floor = installed(name), floors[name]
        if found is not None and version_tuple(found) < version_tuple(floor):
            out.append(f"{name} {found} is installed; hpclaunch needs {name} >= {floor} "
                       f"(pip install '{name}>={floor}' in the job's environment)")
    return out


def _imported_version(package: str) -> tuple[str | None, str | None]:
    """(version, error): the package imported in a child Python, as a rank would import it."""
    code = f"import {package} as m; print(getattr(m, '__version__', ''))"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=IMPORT_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"import {package} took over {IMPORT_TIMEOUT:g} s"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return None, last
    printed = proc.stdout.strip().splitlines()  # a package may print warnings at import (deepspeed does)
    return (printed[-1].strip() if printed else "") or installed(package), None


def package_report(package: str) -> dict[str, Any]:
    found, error = _imported_version(package)
    needed = FLOORS.get(package)
    ok = error is None and (needed is None or version_tuple(found or "0") >= version_tuple(needed))
    return {"found": found, "needed": f">= {needed}" if needed else None, "ok": ok, "error": error}


def visible_devices(accelerator: str) -> dict[str, Any]:
    """How many devices this process can use: torch's count on CUDA, else what the scheduler made visible."""
    if accelerator == "cuda":
        code = "import torch; print(torch.cuda.device_count())"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=IMPORT_TIMEOUT)
        if proc.returncode == 0 and proc.stdout.strip().isdigit():
            return {"count": int(proc.stdout.strip()), "source": "torch.cuda.device_count()"}
    for var in ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "MUSA_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
                "SLURM_JOB_GPUS"):
        value = os.environ.get(var, "").strip()
        if value:
            return {"count": len([d for d in value.split(",") if d.strip()]), "source": var}
    return {"count": 0, "source": "no device variable set"}


def report(packages: tuple[str, ...], accelerator: str) -> dict[str, Any]:
    from hpclaunch.core.version import __version__

    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "hpclaunch": __version__,
        "packages": {name: package_report(name) for name in packages},
        "devices": visible_devices(accelerator),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.envcheck")
    parser.add_argument("--packages", default=",".join(TORCH_STACK), help="comma-separated packages to import")
    parser.add_argument("--accelerator", default="cpu")
    args = parser.parse_args(argv)
    packages = tuple(p for p in args.packages.split(",") if p)
    print(json.dumps(report(packages, args.accelerator)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
