"""Every recipe on one NVIDIA GPU through hpclaunch (profile local-cuda, preset `generated`: full-width
architectures, weights generated from their configs, tokenizers trained locally, no network), with
tokens/s, MFU, peak device memory and the memory plan's estimate side by side; and seed 000's
`main_hf.py` loop (benchmarks/baseline) on the same model, sequence length and micro-batch as the
GPT-2 run.

    python benchmarks/gpu_recipes.py                       # everything (about 10 minutes on an H100)
    python benchmarks/gpu_recipes.py --only gpt2,seed      # GPT-2 124M variants and the seed loop
    python benchmarks/gpu_recipes.py --steps 40 --out /tmp/gpu

Each run is a real `hpclaunch submit ... --follow`; its numbers are read back from the run's metrics
(rank 0, the first log window, which holds start-up and compilation, left out). The plan is
`hpclaunch plan --json` with the same flags. Prints a Markdown table (docs/benchmarks.md) and writes
results.json and runs.log under --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIB = 2**30

# name -> (recipe, extra flags); every run uses --profile local-cuda --preset generated.
RUNS: dict[str, tuple[str, list[str]]] = {
    "gpt2": ("gpt2", []),
    "gpt2-compile": ("gpt2", ["--set", "train.compile=true"]),
    "gpt2-compile-mb32": ("gpt2", ["--set", "train.compile=true", "--set", "train.micro_batch_size=32"]),
    "gpt2-compile-v50304": ("gpt2", ["--set", "train.compile=true", "--set", "model.config.vocab_size=50304"]),
    "bert_large": ("bert_large", []),
    "bert_large-zero2": ("bert_large", ["--set", "deepspeed.zero_stage=2"]),
    "mixtral-1layer": ("mixtral", ["--set", "model.config.num_hidden_layers=1"]),
    "mixtral-2layer": ("mixtral", []),
}


def hpclaunch(*args: str, env: dict[str, str], log, timeout: float) -> tuple[int, str]:
    """(exit code, output) of an hpclaunch command whose output goes to the log as it comes (so that a
    run cut by the timeout still shows how far it got); a job it submitted is cancelled on timeout."""
    cmd = [sys.executable, "-m", "hpclaunch.cli.main", *args]
    log.write(f"\n$ hpclaunch {' '.join(args)}\n")
    log.flush()
    start = log.tell()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = -9
    log.flush()
    with open(log.name) as f:
        f.seek(start)
        output = f.read()
    job = re.search(r"submitted job (\S+)", output)
    if rc == -9 and job:
        subprocess.run([sys.executable, "-m", "hpclaunch.cli.main", "cancel", job.group(1)], env=env,
                       capture_output=True, timeout=60)
    return rc, output


def steps_flag(name: str, steps: int | None) -> list[str]:
    if steps is None:
        return []
    every = max(1, steps // 10)
    return ["--set", f"train.max_steps={steps}", "--set", f"train.log_every={every}"]


def read_metrics(run_dir: Path) -> dict[str, object]:
    path = run_dir / "metrics" / "rank-0.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    train = [r for r in recs if r["kind"] == "train"]
    steady = train[1:] or train
    if not steady:
        return {}
    mfu = [r["mfu"] for r in steady if r.get("mfu") is not None]
    return {
        "steps": train[-1]["step"],
        "first_loss": train[0]["loss"],
        "last_loss": train[-1]["loss"],
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
        "mfu": statistics.median(mfu) if mfu else None,
        "peak_mem_gib": max(r["peak_mem_bytes"] for r in train) / GIB,
    }


def run_seed(run_dir: Path, steps: int, env: dict[str, str], log, timeout: float) -> dict[str, object]:
    out = run_dir / "seed-loop.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
           str(REPO / "benchmarks" / "baseline" / "main_hf_loop.py"), "--config", str(run_dir / "resolved.yaml"),
           "--steps", str(steps), "--out", str(out), "--device", "cuda"]
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}"}
    res = json.loads(out.read_text())
    windows = res["tokens_per_s_windows"][1:] or res["tokens_per_s_windows"]
    return {"tokens_per_s": statistics.median(windows), "peak_mem_gib": (res["peak_mem_bytes"] or 0) / GIB}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join([*RUNS, "seed"]), help="comma-separated run names (and 'seed')")
    p.add_argument("--steps", type=int, default=None, help="max_steps of every run (default: the preset's)")
    p.add_argument("--seed-steps", type=int, default=120)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-recipes-"))
    args = p.parse_args()
    only = args.only.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="hpclaunch-gpu-"))
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the job's `python`
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    results: dict[str, object] = {"device": device, "date": datetime.date.today().isoformat(),
                                  "torch": torch.__version__, "runs": {}}
    runs: dict[str, dict[str, object]] = results["runs"]  # type: ignore[assignment]
    with open(out / "runs.log", "w") as log:
        for name, (recipe, extra) in RUNS.items():
            if name not in only:
                continue
            flags = [f"recipes/{recipe}", "--profile", "local-cuda", "--preset", "generated", *extra,
                     *steps_flag(name, args.steps)]
            row: dict[str, object] = {"command": "hpclaunch submit " + " ".join(flags)}
            t0 = time.time()
            rc, plan = hpclaunch("plan", *flags, "--json", env=env, log=log, timeout=300)
            if rc == 0:
                pj = json.loads(plan.strip().splitlines()[-1])
                row["plan"] = {k: pj.get(k) for k in ("params", "model_states_gib", "activations_gib",
                                                       "per_device_gib", "fits")}
            rc, output = hpclaunch("submit", *flags, "--follow", env=env, log=log, timeout=args.timeout)
            row["exit"] = rc
            if rc == -9:
                row["error"] = f"timed out after {args.timeout:.0f} s"
            m = re.search(r"run directory: (\S+)", output)
            if m:
                run_dir = Path(m.group(1))
                row.update(read_metrics(run_dir))
                if name == "gpt2" and "seed" in only:
                    try:
                        seed = run_seed(run_dir, args.seed_steps, env, log, args.timeout)
                    except subprocess.TimeoutExpired:
                        seed = {"error": "timed out"}
                    runs["seed-loop"] = {"command": "benchmarks/baseline/main_hf_loop.py --device cuda "
                                         "(same model, blocks, micro-batch as gpt2)", **seed}
            row["wall_s"] = round(time.time() - t0, 1)
            runs[name] = row
            print(name, json.dumps(row), flush=True)
            (out / "results.json").write_text(json.dumps(results, indent=1))
    print_table(results)


def print_table(results: dict[str, object]) -> None:
    print(f"\n{results['device']}, torch {results['torch']}, {results['date']}\n")
    print("| run | exit | tokens/s | MFU | peak allocated (GiB) | plan per device (GiB) | peak / plan "
          "| loss first -> last |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    runs: dict[str, dict[str, object]] = results["runs"]  # type: ignore[assignment]
    for name, r in runs.items():
        plan = r.get("plan") or {}
        per = plan.get("per_device_gib") if isinstance(plan, dict) else None
        peak = r.get("peak_mem_gib")
        ratio = f"{peak / per:.2f}" if isinstance(peak, float) and per else ""
        mfu = f"{r['mfu']:.1%}" if isinstance(r.get("mfu"), float) else ""
        tps = f"{r['tokens_per_s']:,.0f}" if isinstance(r.get("tokens_per_s"), (int, float)) else r.get("error", "")
        loss = f"{r['first_loss']:.3f} -> {r['last_loss']:.3f}" if "first_loss" in r else ""
        print(f"| {name} | {r.get('exit', '')} | {tps} | {mfu} | {peak or 0:.2f} | {per or ''} | {ratio} | {loss} |")
    seed = runs.get("seed-loop", {}).get("tokens_per_s")
    for name in ("gpt2", "gpt2-compile", "gpt2-compile-mb32"):
        ours = runs.get(name, {}).get("tokens_per_s")
        if seed and ours and name != "gpt2-compile-mb32":
            print(f"{name} / seed 000 loop (same model, seq 1024, micro-batch 16): {ours / seed:.2f}x")


if __name__ == "__main__":
    main()
