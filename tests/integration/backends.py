"""The two ways hpclaunch reaches the dev cluster, for the end-to-end tests that run through both:
``dev-slurm`` (Slurm's commands: sbatch, squeue, scontrol, scancel, sacct) and ``dev-slurm-rest`` (slurmrestd on
127.0.0.1:6820 with a JWT, scheduler ``slurm-rest``). A test takes the ``backend`` fixture
(tests/integration/conftest.py) and runs once per backend: ``submit(backend.env(env), *backend.args, ...)``, where
``backend.args`` is ``--profile NAME`` (and, for REST, ``--sbatch export=PYTHONPATH``: slurmrestd passes no
environment on, sbatch passes all of it; with it both backends run this checkout's hpclaunch on the nodes). Status,
cancel and the registry go through the backend the job was submitted with (the job's record names its profile).

The token comes from ``scontrol token`` (as a user gets one) and is given to hpclaunch in ``SLURM_JWT``; the
slurm-rest scheduler never passes it into the job (srun inside a job with SLURM_JWT set would authenticate with
it, and slurmd refuses that). hpclaunch itself runs with a PATH that has none of Slurm's commands (as on a notebook
or a gateway): a REST job step that fell back to sbatch or squeue fails instead of passing unnoticed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest

REST_URL = "http://127.0.0.1:6820"
SLURM_COMMANDS = {"sbatch", "srun", "squeue", "scontrol", "scancel", "sacct", "sinfo", "salloc", "sacctmgr",
                  "sstat", "sprio", "sshare", "sdiag", "strigger", "sattach", "sbcast", "scrontab", "sreport",
                  "sh5util", "sview", "seff", "sjobexitmod", "sjstat", "smail", "sgather"}


@lru_cache(maxsize=1)
def path_without_slurm() -> str:
    """A PATH of every command of this machine but Slurm's (links in one folder, made once per test session)."""
    folder = Path(tempfile.mkdtemp(prefix="bin-without-slurm-"))
    for where in os.environ["PATH"].split(os.pathsep):
        for exe in sorted(Path(where).glob("*")) if Path(where).is_dir() else []:
            if exe.name not in SLURM_COMMANDS and not (folder / exe.name).exists():
                (folder / exe.name).symlink_to(exe)
    path = str(folder)
    assert shutil.which("sbatch", path=path) is None and shutil.which("squeue", path=path) is None
    assert shutil.which("bash", path=path) and shutil.which("git", path=path)
    return path


@lru_cache(maxsize=1)
def rest_token() -> str:
    """A JWT for root from `scontrol token`, when slurmrestd answers a ping with it; else ""."""
    if shutil.which("scontrol") is None:
        return ""
    out = subprocess.run(["scontrol", "token", "username=root", "lifespan=7200"], capture_output=True, text=True)
    token = out.stdout.strip().removeprefix("SLURM_JWT=") if out.returncode == 0 else ""
    req = urllib.request.Request(f"{REST_URL}/slurm/v0.0.38/ping",
                                 headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token})
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as resp:
            up = json.loads(resp.read())["pings"][0]["ping"] == "UP"
    except (OSError, ValueError, KeyError, IndexError):
        up = False
    return token if token and up else ""


@dataclass(frozen=True)
class Backend:
    profile: str
    extra: tuple[str, ...] = ()
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def rest(self) -> bool:
        return self.profile.endswith("-rest")

    @property
    def args(self) -> tuple[str, ...]:
        """What `submit` takes to go through this backend: `--profile NAME` and its extra options."""
        return ("--profile", self.profile, *self.extra)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with what this backend needs (REST: the token) and without what would mislead it."""
        out = {k: v for k, v in base.items() if k not in ("SLURM_JWT", "SLURM_JWT_FILE", "SLURMRESTD_URL")}
        out.update(self.variables)
        if self.rest:
            out["PATH"] = path_without_slurm()
        return out


def make_backend(name: str) -> Backend:
    """The backend of the bundled profile `name` (skips when slurmrestd is not up: strict skips make that a failure)."""
    if name == "dev-slurm":
        return Backend(name)
    token = rest_token()
    if not token:
        pytest.skip("slurmrestd with JWT is not up on 127.0.0.1:6820 (scripts/dev-cluster.sh up starts it)")
    return Backend(name, ("--sbatch", "export=PYTHONPATH"), {"SLURM_JWT": token})
