"""`hpclaunch profiles check`: does the cluster have what the profile says, asked from here before a job waits in
the queue to find out? Each check is a row (what, found, how to fix):

- the scheduler's own checks (Slurm: commands on PATH; each partition in sinfo with its GRES, CPUs, memory,
  time limit: hpclaunch/schedulers/slurm/checks.py);
- the module init file, and every module the profile loads (`module is-avail`, Lmod and Environment Modules);
- each Python environment (the job's and the named `python_envs`): a venv's activate script and interpreter, a
  conda init file and environment;
- with `on_node`: one task on one node of the default partition runs the job's own set-up (modules, Python
  environment) and hpclaunch/runtime/node/envcheck.py there: hpclaunch and the recipes' packages imported at
  versions the runtime works with, and the devices the node shows the job.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.requirements import TORCH_STACK
from hpclaunch.core import cmd
from hpclaunch.errors import CommandError
from hpclaunch.schedulers import get_scheduler
from hpclaunch.schedulers.base import Check

if TYPE_CHECKING:
    from hpclaunch.config.profile import Modules, Profile, PythonEnv

PROBE_TIMEOUT = 900.0  # seconds for `--on-node`, queue wait included
_MODULES_SCRIPT = r"""
init=$1; shift
if [ -n "$init" ]; then . "$init" >/dev/null 2>&1 || { echo "init-failed"; exit 0; }; fi
type module >/dev/null 2>&1 || { echo "no-module-command"; exit 0; }
for path in $USE_PATHS; do module use "$path" >/dev/null 2>&1; done
for name in "$@"; do
  if module is-avail "$name" >/dev/null 2>&1; then echo "found $name"; else echo "missing $name"; fi
done
"""


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


def module_checks(m: Modules) -> list[Check]:
    if not (m.init or m.load):
        return []
    out = []
    if m.init:
        found = _expand(m.init).is_file()
        out.append(Check("modules.init", found, f"{m.init}" + (" exists" if found else " does not exist"),
                         "" if found else "set modules.init to the file that defines `module` on this cluster "
                                          "(Lmod: /etc/profile.d/lmod.sh or $LMOD_PKG/init/bash)"))
        if not found:
            return out
    if not m.load:
        return out
    try:
        proc = cmd.run(["bash", "-c", _MODULES_SCRIPT, "hpclaunch-check", m.init or "", *m.load], timeout=120,
                       env={**os.environ, "USE_PATHS": " ".join(m.use)}, check=False)
    except CommandError as exc:
        return [*out, Check("modules", False, exc.message.splitlines()[0], "check that bash and `module` work here")]
    answer = proc.stdout.split()
    if "init-failed" in answer or "no-module-command" in answer:
        return [*out, Check("modules", False, "`module` does not work after sourcing modules.init",
                            "set modules.init to the file that defines `module` (Lmod: /etc/profile.d/lmod.sh)")]
    for name in m.load:
        ok = f"found {name}" in proc.stdout
        out.append(Check(f"module {name}", ok, "available" if ok else "not found by `module is-avail`",
                         "" if ok else f"`module -t avail {name.split('/')[0]}` lists the versions there are; fix "
                                       "modules.load (or modules.use for its folder)"))
    return out


def python_checks(label: str, py: PythonEnv) -> list[Check]:
    if py.venv:
        activate = _expand(py.venv) / "bin" / "activate"
        found = activate.is_file()
        executable = _expand(py.venv) / "bin" / py.executable
        checks = [Check(f"{label} venv", found, f"{activate}" + (" exists" if found else " does not exist"),
                        "" if found else f"create it (python3 -m venv {py.venv}) or fix {label}.venv")]
        if found and not executable.exists():
            checks.append(Check(f"{label} executable", False, f"{executable} does not exist",
                                f"set {label}.executable to the venv's interpreter (python3?)"))
        return checks
    if py.conda_env:
        return _conda_checks(label, py)
    found_at = cmd.which(py.executable)
    return [Check(f"{label} executable", found_at is not None, found_at or f"{py.executable} is not on PATH here",
                  "" if found_at else f"set {label}.venv or {label}.conda_env, or put {py.executable} on PATH")]


def _conda_checks(label: str, py: PythonEnv) -> list[Check]:
    checks = []
    if py.conda_init:
        found = _expand(py.conda_init).is_file()
        checks.append(Check(f"{label} conda_init", found, f"{py.conda_init}" + (" exists" if found else
                            " does not exist"), "" if found else f"set {label}.conda_init to etc/profile.d/conda.sh "
                                                                 "of your conda installation"))
        if not found:
            return checks
    script = '[ -z "$1" ] || . "$1" >/dev/null 2>&1; conda activate "$2" >/dev/null 2>&1 && command -v "$3"'
    proc = cmd.run(["bash", "-c", script, "hpclaunch-check", str(_expand(py.conda_init or "")) if py.conda_init
                    else "", py.conda_env or "", py.executable], timeout=120, check=False)
    ok = proc.returncode == 0
    checks.append(Check(f"{label} conda_env", ok, f"{py.conda_env}: " + (proc.stdout.strip() if ok else
                        "cannot be activated"), "" if ok else f"`conda env list` shows the environments; fix "
                                                              f"{label}.conda_env or create it"))
    return checks


def node_checks(profile: Profile, folder: Path, *, timeout: float = PROBE_TIMEOUT) -> list[Check]:
    """One task on a node of the default partition: the job's own set-up, then envcheck's report as rows. The
    script and its output go to `folder` (on the run root: a filesystem the nodes share)."""
    from hpclaunch.submission.render import render_profile_check

    folder.mkdir(parents=True, exist_ok=True)
    script, output = folder / "check.sh", folder / "check.out"
    script.write_text(render_profile_check(profile, profile.python, TORCH_STACK), encoding="utf-8")
    label = f"on node ({profile.default_partition})"
    code = get_scheduler(profile.scheduler).run_probe(script, output, profile, timeout=timeout)
    text = output.read_text(encoding="utf-8", errors="replace") if output.exists() else ""
    data = _last_json(text)
    if data is None:
        last = (text.strip().splitlines() or [f"exit code {code}, no output"])[-1]
        fix = (f"install hpclaunch into the job's environment (pip install './hpclaunch[recipes]'); {output} has "
               "the whole output" if "No module named 'hpclaunch'" in text or "No module named hpclaunch" in text
               else f"read {output}; fix modules or python in the profile (the rows above)")
        return [Check(label, False, f"the set-up failed: {last}", fix)]
    return [Check(label, True, f"ran on {_node(text)} (exit {code})"), *_envcheck_rows(data, profile.accelerator)]


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _node(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("hpclaunch-check: node "):
            return line.split()[-1]
    return "?"


def checks(profile: Profile, *, on_node: Path | None = None) -> list[Check]:
    """Every check of the profile; `on_node`: also run one task on a node, its files in that folder."""
    out = get_scheduler(profile.scheduler).check_profile(profile)
    out += module_checks(profile.modules)
    out += python_checks("python", profile.python)
    for name, py in profile.python_envs.items():
        out += python_checks(f"python_envs.{name}", py)
    if on_node is not None:
        out += node_checks(profile, on_node)
    return out


def _envcheck_rows(data: dict[str, Any], accelerator: str) -> list[Check]:
    rows = [Check("on node: hpclaunch", bool(data.get("hpclaunch")), f"hpclaunch {data.get('hpclaunch')}, Python "
                  f"{data.get('python')} ({data.get('executable')})" if data.get("hpclaunch") else
                  f"not importable by {data.get('executable')}",
                  "" if data.get("hpclaunch") else "install hpclaunch into the job's environment: pip install "
                                                   "'./hpclaunch[recipes]' (from a checkout)")]
    for name, p in (data.get("packages") or {}).items():
        detail = p.get("error") or f"{name} {p.get('found')} (needs {p.get('needed') or 'any'})"
        rows.append(Check(f"on node: {name}", bool(p.get("ok")), detail, "" if p.get("ok") else
                          f"pip install '{name}{(p.get('needed') or '').replace(' ', '')}' in the job's environment"))
    devices = data.get("devices") or {}
    seen = int(devices.get("count") or 0)
    ok = seen >= 1 or accelerator == "cpu"  # on CPU the "devices" are processes: none to see
    rows.append(Check("on node: devices", ok, f"{seen} visible to the job (asked 1; {devices.get('source')})"
                      + (", training on the CPU" if accelerator == "cpu" else ""),
                      "" if ok else "the node shows the job no device: check the partition's GRES and the driver"))
    return rows
