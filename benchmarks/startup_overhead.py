"""The job script's own overhead on the dev Slurm cluster (issue 14; figure in docs/benchmarks.md, aim < 1 s).

Submits the `allreduce` test recipe (2 nodes x 2 ranks, modules from the dev Lmod tree) N times, one after
the other, and reads each job's start-up timeline (RUN_DIR/timeline.jsonl): `job script` is the script's
work after modules and the python environment (variables, head node, port) up to the launch command, `env`
the module loads and activation before it; `before launch` is the two together, from the script's first line
to the launch command. Run it under the cluster lock:

    flock /tmp/hpclaunch-cluster.lock python benchmarks/startup_overhead.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.state import timeline  # noqa: E402 - after the path: this checkout's hpclaunch
from hpclaunch.state.runfiles import RunFiles  # noqa: E402


def one_job(home: Path) -> dict:
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "HPCLAUNCH_PATH": str(REPO / "tests" / "fixtures"),
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "submit", "allreduce", "--profile",
                           "dev-slurm", "--nodes", "2", "--gpus-per-node", "2", "--follow"],
                          capture_output=True, text=True, env=env, timeout=600)
    run_dir = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    if proc.returncode or not run_dir:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    (entry,) = timeline.load(RunFiles(Path(run_dir.group(1))))
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            e = one_job(Path(tmp))
            p, d = e["phases"], e["durations"]
            rows.append((e["job"], d["env"], d["job_script"], p["launched"] - p["started"], d["queued"],
                         d["launcher"]))
            print(f"job {rows[-1][0]}: env {d['env']:.3f} s, job script {d['job_script']:.3f} s, before launch "
                  f"{rows[-1][3]:.3f} s (queued {d['queued']:.2f} s, launcher {d['launcher']:.2f} s)", flush=True)
    print("| what | median | max |\n|---|---|---|")
    for i, name in ((1, "env (module load + python env)"), (2, "job script after env, up to the launch"),
                    (3, "before launch (script start to launch command)")):
        values = [r[i] for r in rows]
        print(f"| {name} | {statistics.median(values):.3f} s | {max(values):.3f} s |")


if __name__ == "__main__":
    main()
