"""Wall time of `hpclaunch submit RECIPE --profile guangzhou-a800 --dry-run` for each bundled recipe.

Each measurement is a fresh process (what a user waits for on a login node): interpreter start,
imports, resolve, render and writing the run directory. Prints a Markdown table and, with --write,
puts it into docs/benchmarks/dry_run.md.

    python benchmarks/dry_run.py [--repeat 15] [--profile guangzhou-a800] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.3
FALLBACK_PROFILES = ("ascend-910", "local")


def bundled_recipes() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "recipes").glob("*/recipe.yaml"))


def command() -> list[str]:
    exe = shutil.which("hpclaunch")
    return [exe] if exe else [sys.executable, "-m", "hpclaunch.cli.main"]


def runs(argv: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(argv, env=env, capture_output=True).returncode == 0


def measure(argv: list[str], env: dict[str, str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--profile", default="guangzhou-a800")
    ap.add_argument("--write", action="store_true", help="write docs/benchmarks/dry_run.md")
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="hpclaunch-bench-")
    env = {**os.environ, "HPCLAUNCH_HOME": home}
    base = command()
    rows = []
    try:
        # the floor: the interpreter alone, and the CLI's imports alone
        floor = statistics.median(measure([sys.executable, "-c", "pass"], env, args.repeat))
        imports = statistics.median(measure([sys.executable, "-c", "import hpclaunch.cli.main"], env, args.repeat))
        for recipe in bundled_recipes():
            # a recipe the profile cannot run (e.g. a MindSpore recipe on a CUDA cluster) uses the next one
            for profile in (args.profile, *FALLBACK_PROFILES):
                argv = [*base, "submit", recipe, "--profile", profile, "--dry-run"]
                if runs(argv, env):
                    break
            times = measure(argv, env, args.repeat)
            rows.append((recipe if profile == args.profile else f"{recipe} (profile {profile})",
                         statistics.median(times), min(times), max(times)))
    finally:
        shutil.rmtree(home, ignore_errors=True)

    load = os.getloadavg()[0]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {platform.node() or 'this machine'}: "
        f"{os.cpu_count()} CPU cores, Python {platform.python_version()}, load average {load:.1f} at the end; "
        f"median of {args.repeat} fresh processes each.",
        "",
        f"| recipe (`hpclaunch submit RECIPE --profile {args.profile} --dry-run`) | median s | min s | max s |",
        "|---|---|---|---|",
        *[f"| {r} | {med:.3f} | {lo:.3f} | {hi:.3f} |" for r, med, lo, hi in rows],
        f"| (python -c pass: interpreter start only) | {floor:.3f} | | |",
        f"| (python -c 'import hpclaunch.cli.main': CLI imports) | {imports:.3f} | | |",
        "",
        f"Target: well under {TARGET_S} s. "
        + ("All recipes meet it." if all(med < TARGET_S for _, med, _, _ in rows)
           else "NOT met for: " + ", ".join(r for r, med, _, _ in rows if med >= TARGET_S) + "."),
    ]
    table = "\n".join(lines)
    print(table)
    if args.write:
        out = REPO / "docs" / "benchmarks" / "dry_run.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(HEADER + table + "\n" + FOOTER)
        print(f"wrote {out}", file=sys.stderr)


HEADER = """# Benchmark: dry-run render time

What a user waits for when asking hpclaunch for a job script: `hpclaunch submit RECIPE --profile P
--dry-run` in a fresh process (interpreter start, imports, loading and validating the profile and the
recipe, resolve, render, writing the run directory). Reproduce with:

    python benchmarks/dry_run.py --repeat 15 --write

"""

FOOTER = """
## Notes

- The dry-run does not import torch, transformers, deepspeed or mindspore (checked by
  `tests/unit/test_imports.py`); the CLI imports a command's module only when that command runs.
- Most of the remaining time is the interpreter start and the imports of click, pydantic (and the
  building of the profile/recipe/job-spec models), PyYAML and Jinja2; measure them with
  `python -X importtime -m hpclaunch.cli.main submit gpt2 --profile guangzhou-a800 --dry-run`.
- This machine is shared by several processes at once: the min column is the better estimate of the
  cost on an idle login node, the median of a busy one.
"""

if __name__ == "__main__":
    main()
