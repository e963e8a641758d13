"""Every recipe on one NVIDIA GPU through hpclaunch (profile local-cuda, preset `generated`: full-width
architectures, weights generated from their configs, tokenizers trained locally, no network), with
tokens/s, MFU, peak device memory and the memory plan's estimate side by side; and seed 000's
`main_hf.py` loop (benchmarks/baseline) on the same model, sequence length and micro-batch as the
GPT-2 run.

    python benchmarks/gpu_recipes.py                       # every run (about 15 minutes on an H100)
    python benchmarks/gpu_recipes.py --only gpt2,seed      # GPT-2 124M and seed 000's loop
    python benchmarks/gpu_recipes.py --only mixtral-1layer --out /tmp/gpu

Each run is a real `hpclaunch submit ... --follow`; its numbers are read back from the run's metrics
(rank 0, the first log window, which holds start-up and compilation, left out). The plan is
`hpclaunch plan --json` with the same flags. Prints a Markdown table (docs/benchmarks.md), writes
gpu-latest.json and runs.log under --out, and puts the rows of the runs made into
benchmarks/results/gpu-latest.json (replacing those rows, keeping the others).
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

# name -> (recipe, steps, extra flags); every run uses --profile local-cuda --preset generated. The steps match
# the runs of 2026-11-23 (docs/benchmarks.md) so that the loss at the last step compares with theirs.
RUNS: dict[str, tuple[str, int, list[str]]] = {
    "gpt2": ("gpt2", 200, []),  # the preset: training forward, torch.compile, vocabulary 50304, mb 16
    "gpt2-nodrop": ("gpt2", 200, ["--set", "train.dropout=0"]),
    "bert_large": ("bert_large", 40, []),  # the preset: ZeRO-0 on one rank, compile, sparse head, 32 x 2
    "bert_large-mb8": ("bert_large", 40, ["--set", "train.micro_batch_size=8", "--set", "train.grad_accum=8"]),
    # the preset: ZeRO-0, grouped_mm experts, compile, no checkpointing; seed 000's depth (1 layer)
    "mixtral-1layer": ("mixtral", 100, ["--set", "model.config.num_hidden_layers=1"]),
    # 4 sequences per step instead of 1 (a larger global batch: its loss is not the preset's)
    "mixtral-1layer-mb4": ("mixtral", 100, ["--set", "model.config.num_hidden_layers=1",
                                            "--set", "train.micro_batch_size=4"]),
    # its final checkpoint (~40 GiB by the plan, twice that at once) does not fit a 64 GiB disk beside the 13 GB
    # generated model: preflight refuses it there (it ran out of disk at the end on 2026-11-23)
    "mixtral-2layer": ("mixtral", 20, []),
}
RESULTS = REPO / "benchmarks" / "results" / "gpu-latest.json"


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


def steps_flag(steps: int) -> list[str]:
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
        "peak_gib": round(max(r["peak_mem_bytes"] for r in train) / GIB, 2),
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
    return {"tokens_per_s": statistics.median(windows), "peak_gib": round((res["peak_mem_bytes"] or 0) / GIB, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(RUNS), help="comma-separated run names (and 'seed': seed 000's loop)")
    p.add_argument("--seed-steps", type=int, default=120)
    p.add_argument("--timeout", type=float, default=600, help="seconds for each run")
    p.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-recipes-"))
    p.add_argument("--results", default=str(RESULTS), help="the result file: rows of the runs made replace theirs")
    args = p.parse_args()
    only = args.only.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="hpclaunch-gpu-"))
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the job's `python`
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    common = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__}
    rows: list[dict[str, object]] = []
    with open(out / "runs.log", "w") as log:
        for name, (recipe, steps, extra) in RUNS.items():
            if name in only:
                rows.append({"run": name, "recipe": recipe, **common,
                             **measure(recipe, [*extra, *steps_flag(steps)], env, log, args.timeout)})
                if name == "gpt2" and "seed" in only and rows[-1].get("run_dir"):
                    rows.append({"run": "seed-loop", "recipe": "gpt2", **common, **seed_row(rows[-1], args, env, log)})
                print(json.dumps(rows[-1]), flush=True)
                (out / "gpu-latest.json").write_text(json.dumps(rows, indent=1) + "\n")
    results = Path(args.results)
    kept = [r for r in (json.loads(results.read_text()) if results.exists() else []) if r["run"] not in only]
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps([*kept, *rows], indent=1) + "\n")
    print_table(rows)


def measure(recipe: str, extra: list[str], env: dict[str, str], log, timeout: float) -> dict[str, object]:
    """One `hpclaunch plan` and `hpclaunch submit --follow` of a recipe: the row of gpu-latest.json."""
    flags = [f"recipes/{recipe}", "--profile", "local-cuda", "--preset", "generated", *extra]
    row: dict[str, object] = {"command": "hpclaunch submit " + " ".join(flags)}
    t0 = time.time()
    rc, plan = hpclaunch("plan", *flags, "--json", env=env, log=log, timeout=300)
    if rc == 0:
        row["plan_gib"] = json.loads(plan.strip().splitlines()[-1]).get("per_device_gib")
    rc, output = hpclaunch("submit", *flags, "--follow", env=env, log=log, timeout=timeout)
    row["exit"] = rc
    if rc == -9:
        row["error"] = f"timed out after {timeout:.0f} s"
    m = re.search(r"run directory: (\S+)", output)
    if m:
        row["run_dir"] = m.group(1)
        row.update(read_metrics(Path(m.group(1))))
    if isinstance(row.get("tokens_per_s"), float) and recipe == "bert_large":
        row["seq_per_s"] = round(float(row["tokens_per_s"]) / 512, 1)  # type: ignore[arg-type]
    row["wall_s"] = round(time.time() - t0, 1)
    return row


def seed_row(gpt2: dict[str, object], args: argparse.Namespace, env: dict[str, str], log) -> dict[str, object]:
    try:
        seed = run_seed(Path(str(gpt2["run_dir"])), args.seed_steps, env, log, args.timeout)
    except subprocess.TimeoutExpired:
        seed = {"error": "timed out"}
    return {"command": "benchmarks/baseline/main_hf_loop.py --device cuda (same model, blocks, micro-batch as gpt2)",
            **seed}


def print_table(rows: list[dict[str, object]]) -> None:
    if rows:
        print(f"\n{rows[0]['device']}, torch {rows[0]['torch']}, {rows[0]['date']}\n")
    print("| run | exit | tokens/s | seq/s | MFU | peak allocated (GiB) | plan per device (GiB) | peak / plan "
          "| loss first -> last |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        per, peak = r.get("plan_gib"), r.get("peak_gib")
        ratio = f"{peak / per:.2f}" if isinstance(peak, float) and isinstance(per, (int, float)) and per else ""
        mfu = f"{r['mfu']:.1%}" if isinstance(r.get("mfu"), float) else ""
        tps = f"{r['tokens_per_s']:,.0f}" if isinstance(r.get("tokens_per_s"), (int, float)) else r.get("error", "")
        loss = f"{r['first_loss']:.3f} -> {r['last_loss']:.3f}" if "first_loss" in r else ""
        print(f"| {r['run']} | {r.get('exit', '')} | {tps} | {r.get('seq_per_s', '')} | {mfu} | {peak or 0:.2f} "
              f"| {per or ''} | {ratio} | {loss} |")


if __name__ == "__main__":
    main()
