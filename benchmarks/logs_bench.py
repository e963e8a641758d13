"""Benchmarks of issue 5 (figures go to docs/benchmarks/logs.md):

  1. `hpclaunch logs JOB --diagnose` over 256 rank logs of 20 MB each (one rank raised, the others show
     the gloo cascade), aim < 3 s;
  2. `hpclaunch logs JOB --tail 100` on a 2 GB rank log, aim < 0.2 s;
  3. `hpclaunch jobs` over 500 records: how many scheduler calls (needs Slurm's squeue on PATH).

Usage: python benchmarks/logs_bench.py [--dir /tmp/logs-bench] [--ranks 256] [--mb 20] [--big-gb 2]
The files are written once and reused (delete the folder to rebuild). Timings are wall clock, files in
the page cache (second run of each), plus the whole CLI command as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LINE = (
    b"[rank{r}]: step {s} | loss 3.2711 | lr 1.0e-04 | grad_norm 0.93 | tokens/s 20311 | "
    b"UserWarning: something harmless about Errors\n"
)
GLOO = (
    b"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
    b"Connection closed by peer [10.77.0.1]:59023. This is typically caused by a remote worker crashing.\n"
)


def write_rank_logs(run: Path, ranks: int, mb: int) -> None:
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    block = b"".join(LINE.replace(b"{s}", str(i).encode()) for i in range(4000))
    for r in range(ranks):
        p = logs / f"rank-{r}.restart-0.log"
        if p.is_file() and p.stat().st_size >= mb << 20:
            continue
        body = block.replace(b"{r}", str(r).encode())
        with open(p, "wb") as f:
            written = 0
            while written < mb << 20:
                f.write(body)
                written += len(body)
            f.write(b"[rank%d]: Traceback (most recent call last):\n" % r)
            if r == 137:
                f.write(
                    b"[rank137]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                )
            else:
                f.write(GLOO.replace(b"{r}", str(r).encode()))
    (logs / "job.1.out").write_text(
        "hpclaunch: job 1 restart 0\nsrun: error: node3: task 2: Exited with exit code 1\n"
    )


def write_quiet(run: Path, ranks: int) -> None:
    """The worst case: no rank printed an error (a hang), so every file's last 256 KiB is scanned. The files
    are 1 MiB: only their last 256 KiB is read, so a 20 MB file costs the same."""
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    block = b"".join(LINE.replace(b"{s}", str(i).encode()) for i in range(8000))[: 1 << 20]
    for r in range(ranks):
        (logs / f"rank-{r}.restart-0.log").write_bytes(block.replace(b"{r}", str(r).encode()))


def write_big(path: Path, gb: float) -> None:
    if path.is_file() and path.stat().st_size >= gb * (1 << 30):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    block = b"".join(LINE.replace(b"{r}", b"0").replace(b"{s}", str(i).encode()) for i in range(10000))
    with open(path, "wb") as f:
        while f.tell() < gb * (1 << 30):
            f.write(block)


def best_of(fn, n: int = 3) -> dict:  # noqa: ANN001
    """Best wall-clock and CPU seconds of n runs (CPU time is what the machine's load cannot inflate)."""
    wall, cpu = [], []
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {"wall_s": round(min(wall), 4), "cpu_s": round(min(cpu), 4)}


def cli(*args: str, env: dict) -> float:
    t = time.perf_counter()
    exe = (
        [shutil.which("hpclaunch")]
        if shutil.which("hpclaunch")
        else [sys.executable, "-m", "hpclaunch.cli.main"]
    )
    subprocess.run([*exe, *args], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/logs-bench"))
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--big-gb", type=float, default=2.0)
    a = ap.parse_args()

    from hpclaunch.logs.diagnose import diagnose
    from hpclaunch.logs.read import merged
    from hpclaunch.state import registry
    from hpclaunch.state.runfiles import RunFiles

    home = a.dir / "home"
    env = {**os.environ, "HPCLAUNCH_HOME": str(home)}
    os.environ["HPCLAUNCH_HOME"] = str(home)
    run, big_run = a.dir / "run", a.dir / "big"
    t = time.perf_counter()
    write_rank_logs(run, a.ranks, a.mb)
    write_quiet(a.dir / "quiet", a.ranks)
    write_big(big_run / "logs" / "rank-0.restart-0.log", a.big_gb)
    print(f"fixtures ready in {time.perf_counter() - t:.1f} s")
    for jid, rd in (("local-1", run), ("local-2", big_run)):
        registry.add(
            registry.JobRecord(
                jid,
                "local",
                "local",
                "bench",
                None,
                "torchrun",
                "1n8g",
                "bench",
                str(rd),
                "2026-11-22T07:00:00+0000",
            )
        )
    results: dict[str, object] = {"loadavg_before": os.getloadavg(), "cpus": os.cpu_count()}
    d = diagnose(run, "local-1")
    assert (d.cause, d.rank) == ("device_oom", 137), d
    results["diagnose_256x20MB_s"] = best_of(lambda: diagnose(run, "local-1"))
    results["diagnose_256_quiet_logs_s"] = best_of(lambda: diagnose(a.dir / "quiet", "local-3"))
    results["diagnose_cli_s"] = min(cli("logs", "local-1", "--diagnose", env=env) for _ in range(3))
    big_files = RunFiles(big_run).rank_logs()
    assert len(list(merged(big_files, tail=100))) == 100
    results["tail100_2GB_s"] = best_of(lambda: list(merged(big_files, tail=100)), 5)
    results["tail100_2GB_cli_s"] = min(cli("logs", "local-2", "--tail", "100", env=env) for _ in range(3))
    results["cli_startup_s"] = min(cli("--version", env=env) for _ in range(3))

    if shutil.which("squeue"):
        from hpclaunch.core import cmd

        for i in range(500):
            registry.add(
                registry.JobRecord(
                    str(800000 + i),
                    "slurm",
                    "dev-slurm",
                    "bench",
                    None,
                    "torchrun",
                    "1n1g",
                    "bench",
                    str(a.dir / "none"),
                    "2026-11-22T06:00:00+0000",
                )
            )
        calls: list[str] = []
        seam = cmd.run

        def counting(argv, **kw):  # noqa: ANN001, ANN003
            calls.append(argv[0])
            return seam(argv, **kw)

        cmd.run = counting
        from hpclaunch.jobs.state import statuses

        recs = [r for r in registry.all_records() if r.scheduler == "slurm"]
        t = time.perf_counter()
        statuses(recs)
        results["jobs_500_s"] = time.perf_counter() - t
        results["jobs_500_scheduler_calls"] = calls
        cmd.run = seam
        results["jobs_500_cli_s"] = cli("jobs", "--limit", "0", "--json", env=env)
    results["loadavg_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
