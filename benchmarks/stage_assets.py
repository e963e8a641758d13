"""Benchmark: `hpclaunch stage-assets` vs `hf download` against the loopback test hub.

Two cases, side by side, each run REPEATS times alternating (best wall time kept):

  big:   one 1 GiB file (model.safetensors of model repo bench/big)
  many:  2,000 small files (4 KiB parquet-named files of dataset bench/many, config "many")

stage-assets checks sha256 of every file against the server's LFS oid or git blob id; `hf download`
(huggingface_hub's CLI) checks sizes only. Both use 8 parallel workers. Then the re-stage of the
complete set is timed (the whole CLI process, and the staging itself as stage-assets reports it).
For a like-for-like check, `hf download` followed by a sha256 of what it wrote is timed too (what a
user verifying a download by hand does).

    python benchmarks/stage_assets.py [--size-mib 1024] [--files 2000] [--repeats 2] [--out results.json]

Loopback only (127.0.0.1), temporary files under one folder removed at the end; every command has a
timeout, so the script stops by itself.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 600


def make_repos(root: Path, size_mib: int, n_files: int) -> None:
    big = root / "models" / "bench--big"
    big.mkdir(parents=True)
    (big / "config.json").write_text("{}")
    block = os.urandom(1 << 20)
    with open(big / "model.safetensors", "wb") as f:
        for i in range(size_mib):
            f.write(block[:-8] + i.to_bytes(8, "little"))
    many = root / "datasets" / "bench--many" / "many"
    many.mkdir(parents=True)
    for i in range(n_files):
        (many / f"train-{i:05d}.parquet").write_bytes(os.urandom(4096))


def start_server(root: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.hubserver.server", str(root)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


def timed(argv: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


def sha256_tree(folder: Path) -> float:
    t0 = time.perf_counter()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and ".cache" not in p.parts:
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(8 << 20):
                    h.update(chunk)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hpclaunch-bench-assets-"))
    server = None
    try:
        hub = work / "hub"
        t0 = time.perf_counter()
        make_repos(hub, args.size_mib, args.files)
        server, url = start_server(hub)
        # warm the server's hash cache (it hashes each file once) so neither side pays for it
        timed(
            [
                sys.executable,
                "-c",
                f"import urllib.request as u; u.urlopen('{url}/api/models/bench/big/tree/main'"
                f").read(); u.urlopen('{url}/api/datasets/bench/many/tree/main').read()",
            ],
            dict(os.environ),
        )
        print(f"repos ready in {time.perf_counter() - t0:.1f}s; server {url}", file=sys.stderr)

        cfg = work / "cfg" / "cluster_profiles"
        cfg.mkdir(parents=True)
        store = work / "store"
        (cfg / "bench.yaml").write_text(
            "scheduler: local\naccelerator: cpu\nbackend: gloo\ndefault_partition: p\n"
            "partitions: {p: {gpus_per_node: 1, cpus_per_node: 2, gres: null}}\n"
            f"assets: {{store: {store}}}\n"
        )
        env = dict(
            os.environ,
            HPCLAUNCH_PATH=str(work / "cfg"),
            HPCLAUNCH_HOME=str(work / "home"),
            HF_ENDPOINT=url,
            HF_HUB_DISABLE_XET="1",
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            HF_HOME=str(work / "hf-home"),
            HF_HUB_DISABLE_TELEMETRY="1",
        )
        cases = {
            "big": (["--model", "bench/big"], ["bench/big"]),
            "many": (["--dataset", "bench/many:many"], ["bench/many", "--repo-type", "dataset"]),
        }
        results: dict = {
            "size_mib": args.size_mib,
            "files": args.files,
            "repeats": args.repeats,
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg()[0],
        }
        for case, (ours_args, hf_args) in cases.items():
            ours_t, hf_t, hf_sha_t = [], [], []
            ours_argv = [
                "hpclaunch",
                "stage-assets",
                *ours_args,
                "--profile",
                "bench",
                "--endpoint",
                url,
                "--json",
            ]
            for _ in range(args.repeats):
                shutil.rmtree(store, ignore_errors=True)
                w, _ = timed([*ours_argv, "--workers", "8"], env)
                ours_t.append(w)
                dest = work / "hf-out"
                shutil.rmtree(dest, ignore_errors=True)
                shutil.rmtree(work / "hf-home", ignore_errors=True)
                hf_argv = ["hf", "download", *hf_args, "--local-dir", str(dest), "--max-workers", "8"]
                w, _ = timed(hf_argv, env)
                hf_t.append(w)
                hf_sha_t.append(w + sha256_tree(dest))
            # re-stage of the complete set: the whole CLI process, and what stage-assets itself reports
            w, out = timed(ours_argv, env)
            inner = json.loads(out)["seconds"]
            results[case] = {
                "stage_assets_s": [round(x, 2) for x in ours_t],
                "hf_download_s": [round(x, 2) for x in hf_t],
                "hf_download_then_sha256_s": [round(x, 2) for x in hf_sha_t],
                "ratio_hf_over_ours": round(min(hf_t) / min(ours_t), 2),
                "ratio_hf_sha256_over_ours": round(min(hf_sha_t) / min(ours_t), 2),
                "restage_cli_s": round(w, 2),
                "restage_inner_s": inner,
            }
            print(
                f"{case}: stage-assets {min(ours_t):.2f}s, hf download {min(hf_t):.2f}s "
                f"(+sha256 {min(hf_sha_t):.2f}s), ratio {results[case]['ratio_hf_over_ours']}x "
                f"({results[case]['ratio_hf_sha256_over_ours']}x with sha256); re-stage {w:.2f}s "
                f"(staging itself {inner:.3f}s)",
                file=sys.stderr,
            )
        results["load_avg_at_end"] = os.getloadavg()[0]
        text = json.dumps(results, indent=1)
        print(text)
        if args.out:
            args.out.write_text(text)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
