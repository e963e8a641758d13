"""DeepSpeed checkpoints: how long the step loop stops for each one, and how long its write goes on after that.

Submits a DeepSpeed recipe's `tiny` preset on the `local` profile (1 node x 2 CPU ranks) with a checkpoint every
``--every`` steps, then reads what the job recorded itself: RUN_DIR/checkpoints.jsonl (per checkpoint: blocked_s,
the time the loop stood still in the save; write_s, the write after that in the background; async) and rank 0's
train metrics (the loop's time from the first log step to the last, checkpoints included). Prints one JSON object.

    python benchmarks/ds_checkpoint.py                       # this checkout
    python benchmarks/ds_checkpoint.py --checkout DIR        # another tree's hpclaunch (`git archive` of a commit)
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

from benchmarks.scale import overlay  # noqa: E402  (a venv whose hpclaunch is another tree's)


def run(python: str, work: Path, recipe: str, steps: int, every: int) -> dict[str, object]:
    profile = work / "local-bench.yaml"
    venv = f"python: {{venv: {Path(python).parents[1]}}}\n" if python != sys.executable else ""
    profile.write_text((REPO / "cluster_profiles" / "local.yaml").read_text() + venv)
    cmd = [python, "-m", "hpclaunch.cli.main", "submit", str(REPO / "recipes" / recipe), "--profile", str(profile),
           "--preset", "tiny", "--set", f"train.max_steps={steps}", "--set", f"train.save_every={every}",
           "--set", f"train.log_every={every}", "--follow"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=work,
                          env={**os.environ, "HPCLAUNCH_HOME": str(work / "home")})
    found = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    if proc.returncode or not found:
        raise SystemExit(f"the job failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    run_dir = Path(found.group(1))
    saved = [json.loads(line) for line in (run_dir / "checkpoints.jsonl").read_text().splitlines()]
    lines = (json.loads(line) for line in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines())
    train = [r for r in lines if r["kind"] == "train"]
    interval = [c for c in saved if c["why"] == "interval"]
    return {
        "recipe": recipe, "steps": steps, "every": every, "run_dir": str(run_dir),
        "checkpoints": [{k: c[k] for k in ("step", "why", "blocked_s", "write_s", "bytes", "async")} for c in saved],
        "interval_blocked_s_median": statistics.median(c["blocked_s"] for c in interval) if interval else None,
        "interval_write_s_median": statistics.median(c["write_s"] for c in interval) if interval else None,
        "loop_s": round(train[-1]["time"] - train[0]["time"], 3),  # from the first log step to the last
        "loop_steps": f"{train[0]['step'] + 1}-{train[-1]['step']}",
        "losses": [r["loss"] for r in train],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default="bert_large", help="a DeepSpeed recipe with a tiny preset")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--every", type=int, default=5, help="a checkpoint (and a log step) every N steps")
    p.add_argument("--checkout", type=Path, help="measure the hpclaunch of this tree, outside /tmp")
    args = p.parse_args()
    python = str(overlay(args.checkout.resolve()) / "bin" / "python") if args.checkout else sys.executable
    with tempfile.TemporaryDirectory(prefix="hpclaunch-dsckpt-", dir=str(Path.home())) as tmp:
        result = run(python, Path(tmp), args.recipe, args.steps, args.every)
    result["checkout"] = str(args.checkout or REPO)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
