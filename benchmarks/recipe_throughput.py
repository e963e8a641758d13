"""Tokens/s of the GPT-2 tiny recipe vs seed 000's main_hf.py loop, side by side (2 CPU ranks).

Both train the same model (the recipe's generated tiny GPT-2), on the same blocks, with the same
micro-batch and sequence length, 2 processes with torchrun and gloo, OMP_NUM_THREADS=1. Runs
alternate (recipe, seed, recipe, seed, ...) so that load from other processes hits both alike.
Throughput is measured over windows of 10 optimizer steps, the first window (warm-up) dropped.

    python benchmarks/recipe_throughput.py --steps 60 --reps 2
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

REPO = Path(__file__).resolve().parent.parent


def run_recipe(home: Path, steps: int, extra: list[str]) -> tuple[Path, list[float]]:
    cmd = [
        sys.executable,
        "-m",
        "hpclaunch.cli.main",
        "submit",
        str(REPO / "recipes" / "gpt2"),
        "--profile",
        "local",
        "--preset",
        "tiny",
        "--set",
        f"train.max_steps={steps}",
        "--set",
        "train.log_every=10",
        "--set",
        "train.save_every=0",
        "--set",
        "train.eval_steps=1",
        *extra,
        "--follow",
    ]
    out = subprocess.run(
        cmd, capture_output=True, text=True, check=True, env={**os.environ, "HPCLAUNCH_HOME": str(home)}
    )
    run_dir = Path(re.search(r"run directory: (\S+)", out.stdout).group(1))
    recs = [json.loads(x) for x in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()]
    return run_dir, [r["tokens_per_s"] for r in recs if r["kind"] == "train"][1:]


def run_seed(run_dir: Path, steps: int) -> list[float]:
    out = run_dir / "seed-loop.json"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HPCLAUNCH_ASSET_STORE": os.path.expanduser("~/.hpclaunch/assets"),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            str(REPO / "benchmarks" / "baseline" / "main_hf_loop.py"),
            "--config",
            str(run_dir / "resolved.yaml"),
            "--steps",
            str(steps),
            "--out",
            str(out),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    return json.loads(out.read_text())["tokens_per_s_windows"][1:]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument(
        "--micro-batch", type=int, default=None, help="override train.micro_batch_size (both sides)"
    )
    args = p.parse_args()
    extra = ["--set", f"train.micro_batch_size={args.micro_batch}"] if args.micro_batch else []
    home = Path(tempfile.mkdtemp(prefix="hpclaunch-bench-"))
    recipe, seed = [], []
    for rep in range(args.reps):
        run_dir, ours = run_recipe(home, args.steps, extra)
        theirs = run_seed(run_dir, args.steps)
        recipe += ours
        seed += theirs
        print(
            f"rep {rep}: recipe {statistics.median(ours):,.0f} tokens/s, seed 000 loop "
            f"{statistics.median(theirs):,.0f} tokens/s",
            flush=True,
        )
    r, s = statistics.median(recipe), statistics.median(seed)
    print(
        json.dumps(
            {
                "recipe_tokens_per_s": round(r),
                "seed_tokens_per_s": round(s),
                "ratio": round(r / s, 3),
                "windows": {"recipe": [round(x) for x in recipe], "seed": [round(x) for x in seed]},
            }
        )
    )


if __name__ == "__main__":
    main()
