"""A soak: one long run on the dev Slurm cluster with faults at a fixed rate, and the goodput it keeps (issue 35).

GPT-2 tiny on 2 nodes x 1 rank (data parallelism 2) with 2 spare nodes (`--spare-nodes 2`: the dev cluster's other
two; a lost node and a slow one each take one), for about `--minutes` of training, the hang watchdog at 20 s. A
calibration run first measures the step time on this machine (beside its twin on the second cluster, as the soak
runs); the soak then gets as many steps as fit the minutes and one fault every `--every` minutes, in turn:

    kill (rank 1 SIGKILLed), hang (rank 0 stuck), nodefail (rank 1's node lost: every process on it SIGKILLed),
    slow (rank 1 five times slower from then on: swapped for a spare), kill (rank 0), hang (rank 1), ...

while an uninterrupted run of the same steps trains beside it on the second dev cluster (Slurm 26.05,
`scripts/dev-cluster-sid.sh up`), whose losses the soak's must equal. Reported, from `status --json` and the goodput
ledger (`hpclaunch.report.goodput`):

- goodput after the first start-up: the wall seconds from the first step to the end, less what the ledger counts
  lost in them (hung, work done again, recovery, restarts' start-up and health checks, checkpoints blocking, other),
  over those seconds. The spares' idle node-seconds are left out here (they are the price of the spares, listed
  apart), as is the first start-up;
- each recovery: its cause, where the state came from (`peer` or `checkpoint`), the steps done again and the seconds
  from detection to the next step;
- the largest loss difference from the uninterrupted run.

Run it alone on the dev clusters (it holds all four nodes of the first for its length):

    python benchmarks/soak.py [--minutes 20] [--every 4] [--write]

--write puts the result into docs/benchmarks/soak.md and benchmarks/results/soak-latest.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from goodput import cli, follow, losses  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SID_BIN = Path(os.environ.get("HPCLAUNCH_DEV_SID", "/var/lib/hpclaunch-dev-cluster-sid")) / "bin"
CYCLE = ("kill:1", "hang:0", "nodefail:1", "slow:1", "kill:0", "hang:1")


def job_args(steps: int, *extra: str) -> list[str]:
    return ["submit", "recipes/gpt2", "--preset", "tiny", "--layout", "2n1g", "--set", f"train.max_steps={steps}",
            "--set", "train.log_every=1", "--set", "train.eval_every=0", "--set", "train.save_every=200",
            "--set", "watchdog.timeout=20", "--time", "01:00:00", *extra, "--json"]


@contextlib.contextmanager
def sid_commands() -> Iterator[None]:
    """Slurm's commands of the second dev cluster (its wrappers) first on PATH, for the twin's submit and status."""
    before = os.environ["PATH"]
    os.environ["PATH"] = f"{SID_BIN}:{before}"
    try:
        yield
    finally:
        os.environ["PATH"] = before


def submit(home: Path, steps: int, *extra: str, inject: str = "", sid: bool = False) -> str:
    if sid:
        with sid_commands():
            out = cli(home, *job_args(steps, "--profile", "dev-slurm-26", *extra), inject=inject)
    else:
        out = cli(home, *job_args(steps, "--profile", "dev-slurm", *extra), inject=inject)
    return str(json.loads(out)["job_id"])


def step_seconds(status: dict) -> float:
    """The run's mean step time from rank 0's metrics (first step left out: it compiles and warms)."""
    lines = (Path(status["run_dir"]) / "metrics" / "rank-0.jsonl").read_text().splitlines()
    times = [r["time"] for r in map(json.loads, lines) if r.get("kind") == "train" and "time" in r]
    if len(times) < 3:
        raise SystemExit(f"calibration: too few timed steps in {status['run_dir']}")
    return (times[-1] - times[0]) / (len(times) - 1)


def schedule(steps: int, every_steps: int) -> str:
    faults = []
    for i, step in enumerate(range(every_steps, steps - every_steps // 2, every_steps)):
        faults.append(f"{CYCLE[i % len(CYCLE)]}:{step}")
    return ",".join(faults)


def after_first_startup(home: Path, job: str) -> tuple[float, dict[str, Any]]:
    """(goodput after the first start-up, the ledger): the productive seconds over the allocated wall seconds less
    the first launch's start-up and health checks, spares' idle node-seconds left out (`report --json`)."""
    from hpclaunch.report.goodput import after_startup

    rep = json.loads(cli(home, "report", job, "--json"))
    led = rep["goodput"]
    with_spares = after_startup(led, rep["timeline"])  # counts the spares' idle node-seconds
    return with_spares * (led["nodes"] + led["spare_nodes"]) / led["nodes"], led


def soak(home: Path, minutes: float, every: float) -> tuple[dict[str, Any], str]:
    """Calibrate, run the soak and its uninterrupted twin, and read both: (the result, its text)."""
    # calibrated as the soak runs: beside its twin on the second cluster (the same 2 cores)
    calib_jobs = submit(home / "calib", 300), submit(home / "calib-ref", 300, sid=True)
    per_step = step_seconds(follow(home / "calib", calib_jobs[0]))
    with sid_commands():
        follow(home / "calib-ref", calib_jobs[1])
    steps = int(minutes * 60 / per_step)
    faults = schedule(steps, int(every * 60 / per_step))
    print(f"step {per_step:.3f} s: {steps} steps, faults {faults}", flush=True)
    t0 = time.time()
    job = submit(home / "soak", steps, "--spare-nodes", "2", "--set", f"restarts.max={len(CYCLE) + 2}",
                 inject=faults)
    ref_job = submit(home / "ref", steps, sid=True)
    run = follow(home / "soak", job)
    wall = time.time() - t0
    with sid_commands():  # (not left on PATH: `report` of the soak asks the first cluster's accounting)
        ref = follow(home / "ref", ref_job)
    got, want = losses(Path(run["run_dir"])), losses(Path(ref["run_dir"]))
    worst = max(abs(got[s] - want[s]) for s in want) if sorted(got) == sorted(want) else float("inf")
    goodput, led = after_first_startup(home / "soak", job)
    recs = run.get("recoveries") or []
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": steps, "step_s": per_step,
              "faults": faults, "state": run["state"], "wall_s": round(wall, 1),
              "goodput_after_first_startup": round(goodput, 4), "ledger": led, "recoveries": recs,
              "loss_max_abs_diff": worst, "reference_state": ref["state"]}
    lines = [f"soak: {steps} steps ({per_step:.3f} s each), {run['state']}, {wall:.0f} s; faults {faults}",
             f"goodput after the first start-up: {100 * goodput:.1f} % (spares' idle time left out; the ledger's own, "
             f"spares counted: {100 * led['goodput']:.1f} %); lost: "
             + ", ".join(f"{k} {v:.1f} s" for k, v in led["lost_s"].items() if v)
             + f"; steps done again: {led['recomputed_steps']}",
             "", "| cause | state from | steps done again | detection to next step s |", "|---|---|---:|---:|"]
    lines += [f"| {r.get('cause')} | {r.get('source', '?')} | {r.get('recomputed_steps', '?')} | "
              f"{r.get('seconds_to_first_step', '?')} |" for r in recs]
    lines += ["", f"losses vs the uninterrupted run ({ref['state']}): max |difference| {worst:.2e} over {len(want)} "
              "steps"]
    return result, "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=4.0, help="minutes between faults")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result, text = soak(Path(tmp), args.minutes, args.every)
    print(text)
    if args.write:
        (REPO / "benchmarks" / "results" / "soak-latest.json").write_text(json.dumps(result, indent=1) + "\n")
        out = REPO / "docs" / "benchmarks" / "soak.md"
        out.write_text(f"# A soak with faults at a fixed rate\n\n{__doc__.split(chr(10), 2)[2].strip()}\n\n"
                       f"Measured {time.strftime('%Y-%m-%d')} on the dev clusters (2 shared CPU cores):\n\n"
                       f"{text}\n", encoding="utf-8")
        print(f"wrote {out}")
    if result["goodput_after_first_startup"] < 0.95 or result["loss_max_abs_diff"] > 1e-5 \
            or result["state"] != "COMPLETED":
        raise SystemExit("soak: below its targets (goodput >= 95 %, losses equal, COMPLETED)")


if __name__ == "__main__":
    main()
