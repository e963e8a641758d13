"""Side by side: `hpclaunch submit RECIPE --profile P --layout 2n8g --dry-run` (each bundled recipe),
`hpclaunch status JOB` and `hpclaunch jobs` against `torchx run --dryrun -s slurm dist.ddp -j 2x8
--script train.py` (TorchX 0.7.0). Whole-process wall time, as a user waits for it, alternating the
commands run by run; prints median/min/max per command and the ratios.

Each tool runs from a virtual environment of its own, made on first use under --venvs (default
~/.cache/hpclaunch-bench): `torchx-0.7.0` (pip install torchx==0.7.0; `dist.ddp --dryrun` needs no torch)
and `hpclaunch-deps` (hpclaunch's dependencies from pyproject.toml; hpclaunch itself runs from this
checkout through PYTHONPATH, as `python -c 'from hpclaunch.cli.main import main; main()'`, which is
what the installed `hpclaunch` script does). Both interpreters keep compiled bytecode, as an install
does. With --also-current, hpclaunch is measured with the interpreter running this script too (its
site-packages may run .pth hooks at every start).

    python benchmarks/dry_run_vs_torchx.py [--runs 21] [--venvs DIR] [--also-current]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TORCHX = "torchx==0.7.0"
PROFILE = "guangzhou-a800"
LAYOUT = "2n8g"
CLI = "import sys; from hpclaunch.cli.main import main; sys.exit(main())"


def venv(path: Path, packages: list[str]) -> Path:
    """The python of a virtual environment at `path` holding `packages` (made if missing)."""
    python = path / "bin" / "python"
    stamp = path / ".bench-packages"
    if python.is_file() and stamp.is_file() and stamp.read_text() == "\n".join(packages):
        return python
    print(f"making {path} ({', '.join(packages)}) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
                   check=True)
    stamp.write_text("\n".join(packages))
    return python


def hpclaunch_dependencies() -> list[str]:
    """The `dependencies = [...]` of pyproject.toml's [project] (no tomllib on Python 3.10)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "no dependencies list in pyproject.toml"
    return re.findall(r'"([^"]+)"', block.group(1))


def bundled_recipes() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "recipes").glob("*/recipe.yaml"))


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process. CPU time (user + sys) depends less on what else runs."""
    c0, t0 = _child_cpu(), time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - t0, _child_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21, help="runs of each command (alternating)")
    ap.add_argument("--venvs", type=Path, default=Path.home() / ".cache" / "hpclaunch-bench")
    ap.add_argument("--also-current", action="store_true",
                    help="also time hpclaunch with this interpreter (sys.executable)")
    args = ap.parse_args()

    torchx_py = venv(args.venvs / "torchx-0.7.0", [TORCHX])
    hpc_py = venv(args.venvs / "hpclaunch-deps", hpclaunch_dependencies())
    torchx = str(torchx_py.parent / "torchx")

    work = Path(tempfile.mkdtemp(prefix="hpclaunch-vs-torchx-"))
    (work / "train.py").write_text("print('hello')\n")
    home = work / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(HPCLAUNCH_HOME=str(home), PYTHONPYCACHEPREFIX=str(work / "pycache"), XDG_CACHE_HOME=str(work / "cache"))
    hpc_env = {**env, "PYTHONPATH": str(REPO)}
    # one job record for `status JOB` and `jobs` (a local job: no scheduler needed on this machine)
    (home / "registry").mkdir(parents=True)
    (home / "runs" / "r1").mkdir(parents=True)
    (home / "registry" / "local-1.json").write_text(
        '{"job_id": "local-1", "scheduler": "local", "profile": "local", "recipe": "gpt2", "preset": null, '
        '"launcher": "torchrun", "layout": "1n2g", "name": "gpt2", '
        f'"run_dir": "{home / "runs" / "r1"}", "submitted_at": "2026-11-22T07:00:00+0000"}}\n')

    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "torchx run --dryrun -s slurm dist.ddp -j 2x8": (
            [torchx, "run", "--dryrun", "-s", "slurm", "dist.ddp", "-j", "2x8", "--script", "train.py"], env),
    }
    pythons = [("", hpc_py)] + ([(" [current python]", Path(sys.executable))] if args.also_current else [])
    for tag, py in pythons:
        for recipe in bundled_recipes():
            profile = PROFILE if recipe != "gpt_mindspore" else "ascend-910"  # MindSpore needs Ascend NPUs
            commands[f"hpclaunch submit {recipe} --profile {profile} --layout {LAYOUT} --dry-run{tag}"] = (
                [str(py), "-c", CLI, "submit", str(REPO / "recipes" / recipe), "--profile", profile, "--layout",
                 LAYOUT, "--dry-run"], hpc_env)
        # the first dry-run of a config (nothing in hpclaunch's cache yet: PyYAML and Jinja2 are imported)
        commands[f"hpclaunch submit gpt2 --profile {PROFILE} --layout {LAYOUT} --dry-run{tag} (no cache)"] = (
            [str(py), "-c", CLI, "submit", str(REPO / "recipes" / "gpt2"), "--profile", PROFILE, "--layout",
             LAYOUT, "--dry-run"], {**hpc_env, "HPCLAUNCH_NO_CACHE": "1"})
        commands[f"hpclaunch status local-1{tag}"] = ([str(py), "-c", CLI, "status", "local-1"], hpc_env)
        commands[f"hpclaunch jobs{tag}"] = ([str(py), "-c", CLI, "jobs"], hpc_env)
        commands[f"python -c pass{tag} (interpreter start)"] = ([str(py), "-c", "pass"], env)
    commands["python -c pass [torchx venv] (interpreter start)"] = ([str(torchx_py), "-c", "pass"], env)

    times: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for argv, e in commands.values():  # warm-up: bytecode written, caches filled
            run(argv, e, work)
        for _ in range(args.runs):
            for name, (argv, e) in commands.items():
                wall, cpu = run(argv, e, work)
                times[name].append(wall)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = statistics.median
    torchx_med = med(next(iter(times.values())))
    torchx_cpu = med(next(iter(cpus.values())))
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node() or 'this machine'}: {os.cpu_count()} CPU cores, "
          f"Python {platform.python_version()}, {args.runs} alternating runs each, "
          f"load average {load:.1f} at the end")
    print()
    print("| command | median wall s | min | max | TorchX / this (wall medians) | median CPU s "
          "| TorchX / this (CPU medians) |")
    print("|---|---|---|---|---|---|---|")
    for name, ts in times.items():
        cs = cpus[name]
        print(f"| `{name}` | {med(ts):.3f} | {min(ts):.3f} | {max(ts):.3f} | {torchx_med / med(ts):.2f}x "
              f"| {med(cs):.3f} | {torchx_cpu / med(cs):.2f}x |")


if __name__ == "__main__":
    main()
