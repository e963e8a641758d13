"""Goodput through three faults on the dev Slurm cluster: recovery inside the allocation vs --retries (issue 23).

GPT-2 tiny on 2 nodes x 1 rank, HPCLAUNCH_INJECT=kill:1:20,hang:1:60,nodefail:0:100 (a rank killed, a rank hung,
rank 0's node lost), checkpoints every 10 steps, the hang watchdog at 20 s, run twice:

- **in the allocation**: `--spare-nodes 1 --set restarts.max=3`, with the cluster's fourth node held by a blocker
  job for the whole run (a resubmission would wait for it);
- **--retries 3** (`restarts.max=0`): each fault ends the job and the job script resubmits it without the blamed
  node; two nodes are held by a blocker for the first 90 s, so the first resubmission waits in the queue.

Then an uninterrupted run of the same job, whose losses the first run's must equal (to 1e-5). For each run: the
Slurm jobs it took, its wall time (first submit to last end), each recovery's seconds from the fault's detection to
the next finished step (`status --json` recoveries), and the goodput ledger (`hpclaunch.report.goodput`). Run it
alone on the dev cluster (it holds nodes with blocker jobs):

    python benchmarks/goodput.py [--steps 120] [--write]

--write puts the table into docs/benchmarks/goodput.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAULTS = "kill:1:20,hang:1:60,nodefail:0:100"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def cli(home: Path, *args: str, inject: str = "") -> str:
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("HPCLAUNCH_INJECT", None)
    if inject:
        env["HPCLAUNCH_INJECT"] = inject
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"hpclaunch {' '.join(args)}: exit {proc.returncode}\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def blocker(nodes: int, seconds: int) -> str:
    out = subprocess.run(["sbatch", "--parsable", "-J", "goodput-blocker", f"--nodes={nodes}", "--time=00:30:00",
                          "--output=/dev/null", "--exclusive",
                          f"--wrap=sleep {seconds}"], capture_output=True, text=True, check=True)
    job = out.stdout.strip().split(";")[0]
    deadline = time.time() + 120
    while time.time() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if state == "RUNNING":
            return job
        time.sleep(1)
    raise SystemExit(f"the blocker job {job} did not start")


def follow(home: Path, job: str) -> dict:
    """`status JOB --json` once the job (and the last job of its --retries chain) has ended."""
    while True:
        s = json.loads(cli(home, "status", job, "--json"))
        s = s[0] if isinstance(s, list) else s
        last = (s.get("latest") or {}).get("state") if s.get("retries") else s["state"]
        if last in ENDED and (not s.get("retries") or s["state"] in ENDED):
            return s
        time.sleep(2)


def losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines) if r.get("kind") == "train"}


def one(home: Path, steps: int, inject: str, *extra: str) -> tuple[dict, float]:
    t0 = time.time()
    sub = json.loads(cli(home, "submit", "recipes/gpt2", "--profile", "dev-slurm", "--preset", "tiny",
                         "--layout", "2n1g", "--set", f"train.max_steps={steps}", "--set", "train.log_every=1",
                         "--set", "train.eval_every=0", "--set", "train.save_every=10", "--set",
                         "watchdog.timeout=20", *extra, "--json", inject=inject))
    status = follow(home, sub["job_id"])
    return status, time.time() - t0


def beside_blocker(held: tuple[int, int], home: Path, steps: int, inject: str, *extra: str) -> tuple[dict, float]:
    """`one` run while a blocker job holds `held` = (nodes, seconds) of the cluster."""
    job = blocker(*held)
    try:
        return one(home, steps, inject, *extra)
    finally:
        subprocess.run(["scancel", job])


def row(name: str, status: dict, wall: float) -> str:
    jobs = 1 + len(status.get("retries") or [])
    led = status.get("goodput") or {}
    lost = led.get("lost_s", {})
    to_step = [r.get("seconds_to_first_step") for r in status.get("recoveries") or []]
    recover = ", ".join(f"{r['cause']} {t:.1f} s" for r, t in zip(status.get("recoveries") or [], to_step,
                                                                   strict=True) if t is not None) or "—"
    state = (status.get("latest") or {}).get("state") if status.get("retries") else status["state"]
    return (f"| {name} | {state} | {jobs} | {wall:.0f} s | {100 * led.get('goodput', 0):.1f} % | "
            f"{led.get('queued_retries_s', 0):.0f} s | {lost.get('startup', 0):.0f} s | "
            f"{lost.get('recomputed', 0):.1f} s | {lost.get('recovery', 0):.1f} s | {recover} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows, notes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        inside, wall_in = beside_blocker((1, 3600), Path(tmp) / "inside", args.steps, FAULTS, "--spare-nodes", "1",
                                         "--set", "restarts.max=3")
        rows.append(row("inside the allocation (1 spare)", inside, wall_in))
        reference, _ = one(Path(tmp) / "reference", args.steps, "")
        got, want = losses(Path(inside["run_dir"])), losses(Path(reference["run_dir"]))
        worst = max(abs(got[s] - want[s]) for s in want) if sorted(got) == sorted(want) else float("inf")
        notes.append(f"losses after recovery vs the uninterrupted run: max |difference| {worst:.2e} over "
                     f"{len(want)} steps")
        retried, wall_re = beside_blocker((2, 90), Path(tmp) / "retries", args.steps, FAULTS, "--retries", "3",
                                          "--set", "restarts.max=0")
        rows.append(row("--retries 3 (restarts.max=0)", retried, wall_re))
    table = ["| run | end | Slurm jobs | wall | goodput | queued again | start-up | work redone | recovery "
             "| detection to next step |", "|---|---|---|---|---|---|---|---|---|---|", *rows]
    text = "\n".join([*table, "", *notes])
    print(text)
    if args.write:
        out = REPO / "docs" / "benchmarks" / "goodput.md"
        out.write_text(f"# Goodput through three faults\n\n{__doc__.split(chr(10), 2)[2].strip()}\n\n"
                       f"Measured {time.strftime('%Y-%m-%d')} on the dev cluster (2 shared CPU cores, 4 nodes):\n\n"
                       f"{text}\n", encoding="utf-8")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
