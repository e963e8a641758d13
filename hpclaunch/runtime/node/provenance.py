"""The job's half of ``RUN_DIR/provenance.json``: ``python -m hpclaunch.runtime.node.provenance``.

The job script starts it in the background on the head node (where rank 0 runs) right before the launch,
so the first step does not wait for it. It reads what `hpclaunch submit` recorded (version, the recipe
folder's git state, the assets; hpclaunch/submission/provenance.py), adds what only the job can see, and replaces the
file atomically:

    packages   name -> version of every distribution of the job's Python environment (importlib.metadata)
    modules    the loaded environment modules (what `module -t list` prints: Lmod and Environment Modules
               both keep it in LOADEDMODULES)
    nodes      the node list, their number and the head node
    devices    model, driver and count from nvidia-smi, npu-smi or mthreads-gmi, whichever exists
    env        the variables that shape the run (HPCLAUNCH_*, NCCL_*, TORCH_*, CUDA_*, OMP_*, HF_*, SLURM_*, ...),
               with the value of any name containing TOKEN, KEY, SECRET, PASSWORD or JWT redacted

A requeued job writes it again at each start (``job.restart``). It never fails the job: a problem is one
warning line in the job's output. Standard library only: it runs in every job environment.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpclaunch.runtime.node import sampler
from hpclaunch.state import runfiles
from hpclaunch.state.provenance import read, write

ENV_PREFIXES = ("HPCLAUNCH_", "NCCL_", "TORCH_", "TORCHELASTIC_", "PET_", "CUDA_", "OMP_", "MKL_", "HF_",
                "TRANSFORMERS_", "SLURM_", "MASTER_", "HCCL_", "ASCEND_", "MUSA_", "MCCL_", "MTHREADS_", "GLOO_",
                "DS_", "PYTORCH_", "MS_", "GLOG_", "PYTHONPATH", "LD_LIBRARY_PATH", "WORLD_SIZE")
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "JWT")  # SLURM_JWT: a Slurm REST token
REDACTED = "<redacted>"
TOOL_TIMEOUT = 15.0


def is_secret(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_WORDS)


def run_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that shape the run, secrets redacted, sorted by name."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}


def packages() -> dict[str, str]:
    """name -> version of every distribution importable by this interpreter (the first one found wins,
    as for an import)."""
    from importlib import metadata

    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name not in out:
            out[name] = dist.version
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def modules(environ: Mapping[str, str]) -> dict[str, Any]:
    """The module system (lmod | environment-modules | None) and the loaded modules, in load order."""
    system = "lmod" if environ.get("LMOD_CMD") else "environment-modules" if environ.get("MODULESHOME") else None
    loaded = [m for m in environ.get("LOADEDMODULES", "").split(":") if m]
    return {"system": system, "loaded": loaded}


def nodes(environ: Mapping[str, str]) -> dict[str, Any]:
    count = environ.get("HPCLAUNCH_NNODES", "")
    return {"nodelist": environ.get("HPCLAUNCH_NODELIST") or socket.gethostname(),
            "count": int(count) if count.isdigit() else 1,
            "head": environ.get("HPCLAUNCH_HEAD_NODE") or socket.gethostname()}


def _output(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_nvidia_smi(text: str) -> dict[str, Any]:
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`` -> models, driver, count."""
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    return {"models": sorted({r[0] for r in rows}), "driver": rows[0][1] if rows and len(rows[0]) > 1 else None,
            "count": len(rows)}


_VERSION = re.compile(r"Version:\s*([\w.\-]+)", re.IGNORECASE)
_GMI_DRIVER = re.compile(r"Driver Version:\s*(\S+)")


def parse_npu_smi(text: str) -> dict[str, Any]:
    """``npu-smi info``: one device per chip (an Atlas A3 NPU has two), named on its first row
    (``| 0     910B3  | OK ...``), as the usage sampler reads the table (sampler.npu_smi_chips), and its Version."""
    models = [name for _npu, name, _cells in sampler.npu_smi_chips(text)]
    version = _VERSION.search(text)
    return {"models": sorted(set(models)), "driver": version.group(1) if version else None, "count": len(models)}


def parse_mthreads_gmi(text: str) -> dict[str, Any]:
    """``mthreads-gmi`` (its default table, as the sampler reads it: sampler.mthreads_gmi_rows): the name on each
    GPU's first row, the ``Driver Version:`` of the header (tests/fixtures/device-tools/mthreads-gmi.*.txt)."""
    models = [m.group(2) for m in sampler.mthreads_gmi_rows(text)]
    driver = _GMI_DRIVER.search(text)
    return {"models": sorted(set(models)), "driver": driver.group(1) if driver else None, "count": len(models)}


_TOOLS: tuple[tuple[str, list[str], Callable[[str], dict[str, Any]]], ...] = (
    ("nvidia-smi", ["--query-gpu=name,driver_version", "--format=csv,noheader"], parse_nvidia_smi),
    ("npu-smi", ["info"], parse_npu_smi),
    ("mthreads-gmi", [], parse_mthreads_gmi))


def devices() -> dict[str, Any]:
    """The devices of this node from the first vendor tool that exists; on a CPU node, says so."""
    for tool, args, parse in _TOOLS:
        path = shutil.which(tool)
        if path is None:
            continue
        text = _output([path, *args])
        if text is None:
            return {"tool": tool, "count": 0, "models": [], "driver": None, "note": f"{tool} failed"}
        return {"tool": tool, **parse(text)}
    return {"tool": None, "count": 0, "models": [], "driver": None,
            "note": "no accelerator tool (nvidia-smi, npu-smi, mthreads-gmi) on this node: CPU only",
            "cpus": os.cpu_count()}


def job_part(environ: Mapping[str, str]) -> dict[str, Any]:
    restart = environ.get(runfiles.ENV_RESTART, "0")
    return {
        "job": {"job_id": environ.get("HPCLAUNCH_JOB_ID"), "restart": int(restart) if restart.isdigit() else 0,
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": socket.gethostname(),
                "python": sys.version.split()[0], "executable": sys.executable},
        "packages": packages(),
        "modules": modules(environ),
        "nodes": nodes(environ),
        "devices": devices(),
        "env": run_env(environ),
    }


def record(environ: Mapping[str, str]) -> Path:
    """Merge the job's part into the run directory's provenance file (what submit wrote stays)."""
    path = runfiles.RunFiles.from_env(dict(environ)).provenance
    data = read(path)
    data.setdefault("hpclaunch_version", _version())
    data.update(job_part(environ))
    write(path, data)
    return path


def _version() -> str:
    from hpclaunch.core.version import __version__

    return __version__


def main() -> int:
    try:
        record(os.environ)
    except Exception as exc:  # noqa: BLE001 - provenance must never fail the job
        print(f"hpclaunch: warning: provenance.json not written: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
