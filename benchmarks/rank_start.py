"""A rank's start-up on the dev Slurm cluster: CPU seconds per rank and the timeline to the first step (issue 24).

Submits the tiny GPT-2 (`recipes/gpt2 --preset tiny`, 2 steps) at 1 node x 1 rank and at 4 nodes x 1 rank, N times
each, alternating (with `--agents torchrun,none`: with each `launch.agent` in turn), and reads for each job:

- each rank's "startup" metrics record (hpclaunch/runtime/train/startup.py): user + system CPU seconds of the rank's
  process from its start to its first finished step, and the heavy packages it had imported;
- the start-up timeline (RUN_DIR/timeline.jsonl): started -> first_step, and the spans between;
- the CPU seconds of everything the job ran on each node (the node supervisor's last usage sample: launcher agent,
  rank wrappers and ranks, to the job's end), the median over the nodes.

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
sys.path.insert(0, str(REPO))

from hpclaunch.state.timeline import PHASES  # noqa: E402 - after the path: this checkout's hpclaunch

STEPS = ("--set", "train.max_steps=2", "--set", "train.log_every=1", "--set", "train.save_every=0")
# torch's parts that transformers pulls in after `import torch` (counted apart from the rest of torch)
SPLIT = (["_dynamo"], ["_inductor"], ["distributed"], ["_functorch"], ["fx"], ["export"], ["onnx"])
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


EXTRA: list[str] = []  # --set options for every job (--no-health)
# --variants: the rank's model and gradient averaging. `lean`: hpclaunch's torch-only GPT-2 and hook-based all-reduce
# (the default); `transformers`: transformers' GPT2LMHeadModel and torch's DDP (the path before them)
VARIANTS = {"lean": (), "transformers": ("--set", "train.model_code=transformers", "--set", "train.grad_sync=ddp")}


def submit(tree: Path, home: Path, nodes: int, *extra: str) -> Path:
    """One tiny GPT-2 job, followed to its end; its run directory."""
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "hpclaunch.cli.main", "submit", str(tree / "recipes" / "gpt2"), "--profile",
           "dev-slurm", "--preset", "tiny", "--nodes", str(nodes), "--gpus-per-node", "1", *STEPS, *EXTRA, *extra,
           "--follow"]
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


def node_cpu(run_dir: Path) -> float:
    """The median over the nodes of the job's CPU seconds on the node (the supervisor's last sample)."""
    last = [json.loads(p.read_text().splitlines()[-1])["cpu_s"] for p in sorted((run_dir / "usage").glob("node-*"))]
    return statistics.median(last) if last else 0.0


def one_job(tree: Path, home: Path, nodes: int, agent: str = "torchrun", variant: str = "lean") -> dict:
    run_dir = submit(tree, home, nodes, *(["--set", f"launch.agent={agent}"] if agent != "torchrun" else []),
                     *VARIANTS[variant])
    recs, t = startup_records(run_dir), timeline(run_dir)
    if len(recs) != nodes:
        raise SystemExit(f"{run_dir}: {len(recs)} startup records for {nodes} ranks (an uninstrumented tree?)")
    spans = {}
    stamped = [p for p in PHASES[1:-1] if p in t]  # from started to first_step
    for a, b in zip(stamped, stamped[1:], strict=False):
        spans[b] = round(t[b] - t[a], 2)
    return {"run_dir": str(run_dir), "nodes": nodes, "agent": agent, "variant": variant,
            "node_cpu_s": node_cpu(run_dir),
            "startup_s": round(t["first_step"] - t["started"], 2),
            "cpu_s": statistics.median(r["cpu_s"] for r in recs), "cpu_max_s": max(r["cpu_s"] for r in recs),
            "packages": recs[0]["packages"], "spans": spans}


def import_table(log: str, top: int) -> tuple[list[tuple[str, float]], float]:
    """(packages by the self time of all their modules, seconds; the total) from importtime lines: where the
    import time goes, whichever module pulled each one in."""
    per_package: dict[str, float] = {}
    for m in IMPORT_LINE.finditer(log):
        parts = m.group(4).split(".")
        name = ".".join(parts[:2]) if parts[0] == "torch" and parts[1:2] in (*SPLIT,) else parts[0]
        per_package[name] = per_package.get(name, 0.0) + int(m.group(1)) / 1e6
    return sorted(per_package.items(), key=lambda r: -r[1])[:top], sum(per_package.values())


def importtime(tree: Path, home: Path, top: int) -> None:
    run_dir = submit(tree, home, 1, "--set", 'env.PYTHONPROFILEIMPORTTIME="1"')
    rows, total = import_table((run_dir / "logs" / "rank-0.restart-0.log").read_text(), top)
    print(f"\nimporttime of rank 0 ({run_dir}): {total:.2f} s importing in all")
    print("| package | s (self time of its modules) |\n|---|---|")
    for name, seconds in rows:
        print(f"| `{name}` | {seconds:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", default="1,4", help="comma-separated node counts (1 rank per node)")
    parser.add_argument("--tree", type=Path, default=REPO, help="the hpclaunch checkout to run (default: this one)")
    parser.add_argument("--importtime", action="store_true", help="also one job with PYTHONPROFILEIMPORTTIME=1")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--agents", default="torchrun", help="comma-separated launch.agent values (torchrun,none)")
    parser.add_argument("--variants", default="lean", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--no-health", action="store_true", help="without the health check before the launch")
    parser.add_argument("--home", type=Path, help="HPCLAUNCH_HOME to keep the runs in (default: a temporary one)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    if args.no_health:
        EXTRA.extend(["--set", "health.enabled=false"])
    nodes = [int(n) for n in args.nodes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home.resolve() if args.home else Path(tmp)
        submit(tree, home, 1)  # warm-up: generated tokenizer, model and data cached in the store
        rows: dict[tuple[str, str, int], list[dict]] = {
            (a, v, n): [] for a in args.agents.split(",") for v in args.variants.split(",") for n in nodes}
        for _ in range(args.runs):
            for agent, variant, n in rows:
                row = one_job(tree, home, n, agent, variant)
                rows[agent, variant, n].append(row)
                print(json.dumps(row), flush=True)
        print(f"\n{tree}: median of {args.runs}, load average {os.getloadavg()[0]:.1f} at the end")
        print("| launch.agent | model, gradients | nodes x 1 rank | CPU s per rank | CPU s per node (job) "
              "| started -> first step s | spans (median s) |\n|---|---|---|---|---|---|---|")
        for (agent, variant, n), rs in rows.items():
            spans = {k: statistics.median(r["spans"].get(k, 0.0) for r in rs) for k in rs[0]["spans"]}
            text = ", ".join(f"{k} {v:.2f}" for k, v in spans.items())
            print(f"| {agent} | {variant} | {n} | {statistics.median(r['cpu_s'] for r in rs):.2f} | "
                  f"{statistics.median(r['node_cpu_s'] for r in rs):.2f} | "
                  f"{statistics.median(r['startup_s'] for r in rs):.2f} | {text} |")
        if args.importtime:
            importtime(tree, home, args.top)


if __name__ == "__main__":
    main()
