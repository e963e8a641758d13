"""A rank's start-up on the dev Slurm cluster: CPU seconds per rank and the timeline to the first step (issue 24).

Submits the tiny GPT-2 (`recipes/gpt2 --preset tiny`, 2 steps) at 1 node x 1 rank and at 4 nodes x 1 rank, N times
each, alternating, and reads for each job:

- each rank's "startup" metrics record (hpclaunch/runtime/train/startup.py): user + system CPU seconds of the rank's
  process from its start to its first finished step, and the heavy packages it had imported;
- the start-up timeline (RUN_DIR/timeline.jsonl): started -> first_step, and the spans between.

`--importtime` also runs one 1-node job with PYTHONPROFILEIMPORTTIME=1 in the ranks' environment (what
`python -X importtime` does) and prints the rank's top-level imports by cumulative time and their total.
`--tree DIR` runs another checkout's hpclaunch (a "before" tree, e.g. from `git archive`). Run it under the lock:

    flock /tmp/hpclaunch-heavy.lock python benchmarks/rank_start.py --runs 3 --importtime
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEPS = ("--set", "train.max_steps=2", "--set", "train.log_every=1", "--set", "train.save_every=0")
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def submit(tree: Path, home: Path, nodes: int, *extra: str) -> Path:
    """One tiny GPT-2 job, followed to its end; its run directory."""
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "hpclaunch.cli.main", "submit", str(tree / "recipes" / "gpt2"), "--profile",
           "dev-slurm", "--preset", "tiny", "--nodes", str(nodes), "--gpus-per-node", "1", *STEPS, *extra, "--follow"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=tree)
    run_dir = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    if proc.returncode or not run_dir:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return Path(run_dir.group(1))


def startup_records(run_dir: Path) -> list[dict]:
    out = []
    for path in sorted((run_dir / "metrics").glob("rank-*.jsonl")):
        out += [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == "startup"]
    return out


def timeline(run_dir: Path) -> dict[str, float]:
    stamps: dict[str, float] = {}
    for line in (run_dir / "timeline.jsonl").read_text().splitlines():
        rec = json.loads(line)
        stamps[rec["phase"]] = rec["t"]
    return stamps


def one_job(tree: Path, home: Path, nodes: int) -> dict:
    run_dir = submit(tree, home, nodes)
    recs, t = startup_records(run_dir), timeline(run_dir)
    if len(recs) != nodes:
        raise SystemExit(f"{run_dir}: {len(recs)} startup records for {nodes} ranks (is this tree's loop instrumented?)")
    spans = {}
    stamped = [p for p in ("started", "env_ready", "launched", "ranks_started", "imports_done", "rendezvous_done",
                           "model_loaded", "data_ready", "first_step") if p in t]
    for a, b in zip(stamped, stamped[1:]):
        spans[b] = round(t[b] - t[a], 2)
    return {"run_dir": str(run_dir), "nodes": nodes, "startup_s": round(t["first_step"] - t["started"], 2),
            "cpu_s": statistics.median(r["cpu_s"] for r in recs), "cpu_max_s": max(r["cpu_s"] for r in recs),
            "packages": recs[0]["packages"], "spans": spans}


def import_table(log: str, top: int) -> tuple[list[tuple[str, float]], float]:
    """(top-level imports by cumulative seconds, the total of every top-level import) from importtime lines."""
    rows = [(m.group(4), int(m.group(2)) / 1e6) for m in IMPORT_LINE.finditer(log) if m.group(3) == " "]
    return sorted(rows, key=lambda r: -r[1])[:top], sum(r[1] for r in rows)


def importtime(tree: Path, home: Path, top: int) -> None:
    run_dir = submit(tree, home, 1, "--set", "env.PYTHONPROFILEIMPORTTIME=1")
    rows, total = import_table((run_dir / "logs" / "rank-0.restart-0.log").read_text(), top)
    print(f"\nimporttime of rank 0 ({run_dir}): {total:.2f} s in top-level imports")
    print("| top-level import | cumulative s |\n|---|---|")
    for name, seconds in rows:
        print(f"| `{name}` | {seconds:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", default="1,4", help="comma-separated node counts (1 rank per node)")
    parser.add_argument("--tree", type=Path, default=REPO, help="the hpclaunch checkout to run (default: this one)")
    parser.add_argument("--importtime", action="store_true", help="also one job with PYTHONPROFILEIMPORTTIME=1")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    tree = args.tree.resolve()
    nodes = [int(n) for n in args.nodes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        submit(tree, home, 1)  # warm-up: generated tokenizer, model and data cached in the store
        rows: dict[int, list[dict]] = {n: [] for n in nodes}
        for _ in range(args.runs):
            for n in nodes:
                row = one_job(tree, home, n)
                rows[n].append(row)
                print(json.dumps(row), flush=True)
        print(f"\n{tree}: median of {args.runs}, load average {os.getloadavg()[0]:.1f} at the end")
        print("| nodes x 1 rank | CPU s per rank | started -> first step s | spans (median s) |\n|---|---|---|---|")
        for n, rs in rows.items():
            spans = {k: statistics.median(r["spans"].get(k, 0.0) for r in rs) for k in rs[0]["spans"]}
            text = ", ".join(f"{k} {v:.2f}" for k, v in spans.items())
            print(f"| {n} | {statistics.median(r['cpu_s'] for r in rs):.2f} | "
                  f"{statistics.median(r['startup_s'] for r in rs):.2f} | {text} |")
        if args.importtime:
            importtime(tree, home, args.top)


if __name__ == "__main__":
    main()
