"""A job's cost as its node count grows (issue 38; figures and the model to 8,192 nodes in docs/scale.md).

For each N of ``--nodes`` (1,4,16,64) it submits the torch-free stub job (tests/fixtures/recipes/stub, preset bench:
1 rank per node, 40 steps of 1 s, a checkpoint at step 20) on the dev cluster's partition ``scale`` with the project's
defaults of the moment (launch, staging, health: what `hpclaunch submit` gives; each row says which), twice:

1. untraced, for the times: ``startup_s``, sbatch to rank 0's first step, split by the job's own timeline
   (RUN_DIR/timeline.jsonl, hpclaunch/state/timeline.py: from its ``submitted`` stamp, the moment sbatch
   answered; ``submit_cli_s`` is what `hpclaunch submit` took before that); ``status_s``, the median of 3
   ``hpclaunch status JOB`` while it trains, beside ``watch JOB --once``, ``jobs`` and ``logs JOB --diagnose``;
   slurmctld's RPCs per job-minute (``sdiag``'s counts by message type before the submit and after the job's end,
   over the job's minutes: every client of the controller is in them, the other tests' too);
2. under ``strace -f`` attached to the slurmd of every node the job may get (so every process the job starts on a
   node, from its slurmstepd down, is traced; those whose execve environment has SLURM_JOB_ID=<this job>, with their
   children and threads, count): ``shared_read_bytes``, what those processes read (read/pread/readv) and map (mmap:
   an upper bound of what page faults bring in) from the shared filesystem before rank 0's first step, with the files
   and the metadata calls; ``shared_ops_per_s``, every call on a shared path (writes, opens, stats, renames, reads)
   per second in a steady window of training (from 3 s after the first step, for the steps that follow but the last
   5), and per node per 10 s by what the calls are for (``shared_ops_per_node_10s``: node records, checkpoint,
   logs, ...; ``without_checkpoint``: the stub's checkpoint at step 20 falls in the window). The shared filesystem
   here is the checkout and its venv, $HOME (the base interpreter, ~/.hpclaunch: the run
   directory and the asset store) and this benchmark's HPCLAUNCH_HOME; /tmp (node scratch), /usr, /etc, /var, /run,
   /proc, /sys and /dev are each node's own.

It never uses the tests' node[1-4] when the cluster has 4 nodes to spare (``--exclude node[1-4]``): bring it to
N + 4 first. Rows go to ``--out`` (benchmarks/results/scale-latest.json) and an 80-column table to stdout. Up to 16
nodes the health check's all-reduce runs as the profile has it (each node imports torch: ~220 MB); above that
``--health-allreduce auto`` turns it off (64 x 220 MB does not fit this machine's memory beside the other work), and
the row says so.

    scripts/dev-cluster.sh up --nodes 68
    flock /tmp/hpclaunch-heavy.lock python benchmarks/scale.py --nodes 1,4,16,64
    scripts/dev-cluster.sh up --nodes 4

``--plot RESULT.json...`` draws result files into docs/scale.png. ``--checkout DIR`` measures another tree's
hpclaunch (``git archive COMMIT | tar -x -C DIR``, DIR outside /tmp): the CLI and the jobs then run a venv made
beside it whose hpclaunch is DIR's and whose other packages are this venv's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.state import timeline  # noqa: E402
from hpclaunch.state.runfiles import RunFiles  # noqa: E402

STUB = REPO / "tests" / "fixtures" / "recipes" / "stub"
STEPS, STEP_S = 40, 1.0  # the stub's preset bench
PROFILE = """# benchmarks/scale.py: the dev cluster's partition scale (scripts/dev-cluster.sh up --nodes N)
description: dev cluster partition scale - benchmarks/scale.py
scheduler: slurm
accelerator: cpu
backend: gloo
default_partition: scale
partitions:
  scale: {{gpus_per_node: 4, gpu_type: fake, cpus_per_node: 1, memory_gb: 4, max_time: "02:00:00",
          max_nodes: {max_nodes}, gres: gpu}}
modules: {{init: /etc/profile.d/lmod.sh, load: [hpclaunch-dev/1.0]}}
health: {{allreduce: {allreduce}, min_free_gib: {min_free}}}
{python}defaults: {{time: "00:20:00"}}
"""
SHARED = (str(REPO), str(Path.home()), "/work")  # and --checkout's tree (outside /tmp, which is node-local)
LOCAL = ("/tmp", "/usr", "/etc", "/var", "/run", "/proc", "/sys", "/dev", "/lib", "/bin", "/sbin")
READS = {"read", "pread64", "readv", "preadv"}
WRITES = {"write", "pwrite64", "writev", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "unlink", "unlinkat",
          "rmdir", "ftruncate", "fsync", "fdatasync"}
LINE = re.compile(r"^(\d+\.\d+) (\w+)\((.*)\) += (-?\d+|0x[0-9a-f]+|\?)")
FD_PATH = re.compile(r"^-?\w*<([^>]*)>")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


PYTHON = [sys.executable]  # the CLI's and the jobs' python: --checkout's overlay venv


def overlay(checkout: Path) -> Path:
    """A venv whose hpclaunch is `checkout`'s and whose other packages are this one's (two .pth lines: the editable
    install's finder, which would win over PYTHONPATH, is not among them); the jobs run it as the profile's venv."""
    venv = checkout / ".venv-overlay"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "a_checkout.pth").write_text(f"{checkout}\n")
        deps = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
        (site / "b_deps.pth").write_text(f"{deps}\n")
    return venv


def cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "HPCLAUNCH_HOME": str(home), "PATH": f"{Path(PYTHON[0]).parent}:{os.environ['PATH']}"}
    # from the work folder: `python -m` puts the working directory first on sys.path, and a job starts in its
    # submitter's (this checkout's hpclaunch would win over --checkout's)
    return subprocess.run([PYTHON[0], "-m", "hpclaunch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=home.parent)


def timed(home: Path, *args: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cli(home, *args)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)


def scale_nodes() -> list[str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-p", "scale", "-o", "%N"], capture_output=True, text=True).stdout
    return sorted(set(out.split()), key=lambda n: int(n[4:]))


def rpc_count() -> int:
    out = subprocess.run(["sdiag"], capture_output=True, text=True).stdout
    part = out.split("by message type", 1)[-1].split("by user", 1)[0]
    return sum(int(c) for c in re.findall(r"count:(\d+)", part))


def submit(home: Path, profile: Path, n: int, exclude: bool) -> tuple[str, RunFiles, float]:
    t0 = time.time()
    proc = cli(home, "submit", str(STUB), "--profile", str(profile), "--preset", "bench", "--nodes", str(n),
               "--gpus-per-node", "1", *(["--exclude", "node[1-4]"] if exclude else []))
    if proc.returncode:
        raise SystemExit(f"submit of {n} node(s) failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    job = re.search(r"^submitted job (\d+) ", proc.stdout, re.MULTILINE)
    run = re.search(r"run directory: (\S+)", proc.stdout)
    assert job and run, proc.stdout
    return job.group(1), RunFiles(Path(run.group(1))), t0


def stamps(run: RunFiles) -> dict[str, float]:
    return {rec["phase"]: float(rec["t"]) for rec in timeline.read(run) if rec["restart"] == 0}


def wait(run: RunFiles, job: str, phase: str, limit: float) -> float:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if phase in (found := stamps(run)):
            return found[phase]
        if phase != "finished" and "finished" in found:
            raise SystemExit(f"job {job} finished before {phase}: {run.root}/logs")
        time.sleep(0.5)
    subprocess.run(["scancel", job])
    raise SystemExit(f"job {job}: no {phase} within {limit:.0f} s (cancelled): {run.root}/logs")


def ended(job: str) -> None:
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        time.sleep(0.5)


def defaults(run: RunFiles) -> dict[str, object]:
    import yaml

    spec = yaml.safe_load(run.resolved.read_text())
    return {"launch.agent": spec["recipe"].get("launch", {}).get("agent"), "staging": spec.get("staging"),
            "health.enabled": spec["health"]["enabled"], "health.allreduce": spec["health"]["allreduce"]}


def timed_run(home: Path, profile: Path, n: int, exclude: bool) -> dict[str, object]:
    rpcs = rpc_count()
    job, run, t_submit = submit(home, profile, n, exclude)
    first = wait(run, job, "first_step", 900)
    time.sleep(2 * STEP_S)
    status = {"status": timed(home, "status", job), "watch": timed(home, "watch", job, "--once"),
              "jobs": timed(home, "jobs"), "logs_diagnose": timed(home, "logs", job, "--diagnose")}
    finished = wait(run, job, "finished", 900)
    ended(job)
    found = stamps(run)
    spans = timeline.per_restart(timeline.read(run))[0]
    minutes = (finished - found["started"]) / 60
    return {"job": job, "startup_s": round(first - found["submitted"], 3), "submit_cli_s": round(
            found["submitted"] - t_submit, 3), "queued_s": spans["queued_s"],
            "job_startup_s": spans["startup_s"], "phases": spans["durations"], "status_s": status["status"],
            "status": status, "slurmctld_rpcs_per_job_min": round((rpc_count() - rpcs) / minutes, 1),
            "defaults": defaults(run)}


def traced_run(home: Path, profile: Path, n: int, exclude: bool, nodes: list[str], traces: Path) -> dict[str, object]:
    pids = [Path(f"/run/slurm-dev/slurmd-{node}.pid").read_text().strip() for node in nodes
            if not (exclude and int(node[4:]) <= 4)]
    prefix = traces / f"trace-{n}" / "t"
    prefix.parent.mkdir(parents=True)
    calls = "%file,read,pread64,readv,preadv,write,pwrite64,writev,mmap,ftruncate,fsync,fdatasync,getdents64," \
            "clone,clone3,fork,vfork"
    strace = subprocess.Popen(["strace", "-f", "-ff", "-ttt", "-qq", "-y", "-v", "-s", "120", "-e", f"trace={calls}",
                               "-o", str(prefix), *[w for p in pids for w in ("-p", p)]],
                              stderr=subprocess.DEVNULL)
    time.sleep(1.0 + 0.02 * len(pids))  # attached
    try:
        job, run, _ = submit(home, profile, n, exclude)
        first = wait(run, job, "first_step", 1800)
        wait(run, job, "finished", 1800)
        ended(job)
    finally:
        t0 = time.monotonic()
        strace.send_signal(signal.SIGINT)
        strace.wait(timeout=300)
        print(f"strace detached in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    steady = (first + 3, first + 3 + (STEPS - 8) * STEP_S)
    return {"job_traced": job, **count(prefix, job, first, steady)}


def _path(args: str, name: str) -> str | None:
    """The shared-or-not path a call touches: the fd's path (strace -y), or the quoted path (joined to its dirfd)."""
    if name in READS | {"write", "pwrite64", "writev", "ftruncate", "fsync", "fdatasync", "getdents64"}:
        m = FD_PATH.match(args)
        return m.group(1) if m else None
    if name == "mmap":
        parts = args.split(", ")
        m = FD_PATH.match(parts[4]) if len(parts) > 4 else None
        return m.group(1) if m else None
    q = QUOTED.search(args)
    if not q:
        return None
    path = q.group(1)
    if not path.startswith("/"):
        m = FD_PATH.match(args.split(", ", 1)[0].replace("AT_FDCWD", ""))
        path = f"{m.group(1)}/{path}" if m else path
    return path


def shared(path: str) -> bool:
    return path.startswith(SHARED) and not path.startswith(LOCAL)


def count(prefix: Path, job: str, first: float, steady: tuple[float, float]) -> dict[str, object]:
    per_pid: dict[int, list[str]] = {}
    for f in prefix.parent.glob(f"{prefix.name}.*"):
        per_pid[int(f.name.rsplit(".", 1)[1])] = f.read_text(errors="replace").splitlines()
    children: dict[int, list[int]] = defaultdict(list)
    seeds = []
    for pid, lines in per_pid.items():
        for line in lines:
            if " execve(" in line and f'"SLURM_JOB_ID={job}"' in line:
                seeds.append(pid)
            m = LINE.match(line)
            if m and m.group(2) in ("clone", "clone3", "fork", "vfork") and m.group(4).isdigit():
                children[pid].append(int(m.group(4)))
    mine, todo = set(), list(seeds)
    while todo:
        pid = todo.pop()
        if pid not in mine:
            mine.add(pid)
            todo += children.get(pid, [])
    start = {"read_bytes": 0, "mapped_bytes": 0, "metadata_calls": 0}
    files: set[str] = set()
    ops: dict[str, int] = defaultdict(int)
    by_call: dict[str, int] = defaultdict(int)  # steady calls by call and file
    by_kind: dict[str, int] = defaultdict(int)  # steady calls by what they are for (_kind)
    by_top: dict[str, int] = defaultdict(int)  # bytes at start by folder
    for pid in mine:
        for line in per_pid.get(pid, []):
            m = LINE.match(line)
            if not m or m.group(2) in ("clone", "clone3", "fork", "vfork"):
                continue
            t, name, args, ret = float(m.group(1)), m.group(2), m.group(3), m.group(4)
            path = _path(args, name)
            if path is None or not shared(path):
                continue
            if t < first:
                if name in READS and ret.isdigit():
                    start["read_bytes"] += int(ret)
                    by_top[_top(path)] += int(ret)
                    files.add(path)
                elif name == "mmap" and not ret.startswith("-"):
                    start["mapped_bytes"] += int(args.split(", ")[1])
                    by_top[_top(path)] += int(args.split(", ")[1])
                    files.add(path)
                elif name not in WRITES:
                    start["metadata_calls"] += 1
            elif steady[0] <= t < steady[1]:
                ops["write" if name in WRITES else "read" if name in READS else "metadata"] += 1
                by_call[f"{name} {_shape(path)}"] += 1
                by_kind[_kind(_shape(path))] += 1
    window = steady[1] - steady[0]
    return {"shared_read_bytes": start["read_bytes"] + start["mapped_bytes"], "shared_read": {**start,
            "files": len(files), "bytes_by_folder": dict(sorted(by_top.items(), key=lambda kv: -kv[1])[:8])},
            "shared_ops_per_s": round(sum(ops.values()) / window, 2),
            "shared_ops": {"window_s": window, **ops,
                           "by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
                           "by_call": dict(sorted(by_call.items(), key=lambda kv: -kv[1])[:40])},
            "traced_processes": len(mine)}


def _shape(path: str) -> str:
    """A steady call's path with the run directory, job ids and numbers taken out (one row per kind of file)."""
    path = re.sub(r"^.*/runs/[^/]+/", "RUN_DIR/", path)
    return re.sub(r"\d+", "N", path)


KINDS = (("node records", "RUN_DIR/progress/node-"), ("checkpoint", "RUN_DIR/checkpoint"),
         ("logs", "RUN_DIR/logs/"), ("metrics", "RUN_DIR/metrics/"), ("usage samples", "RUN_DIR/usage/"))


def _kind(shape: str) -> str:
    """What a steady call is for, from its path's shape (_shape): the node records, the checkpoint, ...; else other."""
    return next((kind for kind, prefix in KINDS if shape.startswith(prefix)), "other")


def per_node(row: dict[str, Any]) -> dict[str, float]:
    """The steady calls per node per 10 s (the issue's target: at most 1), all of them and without the checkpoint
    (the stub saves one at step 20, inside the window: a periodic event of every rank, not a steady rate)."""
    ops, n = row.get("shared_ops") or {}, row["nodes"]
    if not ops:
        return {}
    total = sum(v for k, v in ops.items() if k in ("read", "write", "metadata"))
    kinds = ops.get("by_kind", {})
    rate = 10 / ops["window_s"] / n
    return {"all": round(total * rate, 2), "without_checkpoint": round((total - kinds.get("checkpoint", 0)) * rate, 2),
            **{kind: round(count * rate, 2) for kind, count in kinds.items()}}


def _top(path: str) -> str:
    """The folder a start-up read counts under: the first four parts of its path (/root/.pyenv/versions/3.11.7)."""
    return "/".join(path.split("/")[:5])


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'nodes':>5} {'start s':>8} {'queued':>6} {'health':>6} {'ranks':>6} {'read MB':>8} {'files':>6} " \
           f"{'meta':>7} {'ops/s':>6} {'status':>6} {'rpc/min':>7}"
    out = [head, "-" * len(head)]
    for r in rows:
        ph, rd = r.get("phases", {}), r.get("shared_read", {})
        out.append(f"{r['nodes']:>5} {r.get('startup_s', 0):>8.1f} {r.get('queued_s') or 0:>6.1f} "
                   f"{ph.get('health', 0):>6.1f} {ph.get('launcher', 0):>6.1f} "
                   f"{r.get('shared_read_bytes', 0) / 1e6:>8.1f} {rd.get('files', 0):>6} "
                   f"{rd.get('metadata_calls', 0):>7} {r.get('shared_ops_per_s', 0):>6.1f} "
                   f"{r.get('status_s', 0):>6.2f} {r.get('slurmctld_rpcs_per_job_min', 0):>7.0f}")
    return "\n".join(out)


def plot(results: list[Path], png: Path) -> None:
    """Four panels against N (log-log), one line per result file (its label): docs/scale.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2))
    panels = [("startup_s", "sbatch to first step (s)", 1), ("shared_read_bytes", "shared FS read at start (MB)", 1e6),
              ("shared_ops_per_s", "shared FS ops/s, steady", 1), ("status_s", "hpclaunch status (s)", 1)]
    for path in results:
        data = json.loads(path.read_text())
        rows = [r for r in data["rows"] if all(k in r for k, _, _ in panels) and "not_rerun" not in r]  # kept rows
        for ax, (key, title, unit) in zip(axes, panels, strict=True):
            ax.plot([r["nodes"] for r in rows], [r[key] / unit for r in rows], marker="o",
                    label=data.get("label") or path.stem)
            ax.set_title(title, fontsize=9)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("nodes")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def records_model(counts: list[int], ranks: int = 8) -> list[dict[str, object]]:
    """What status and watch pay to read node 0's file (RunFiles.progress_records) for N nodes of `ranks` ranks, with
    the ranks' slow-node windows (``hw``: 21 windows, stragglers.windows 5 + 16) and without them, as node 0 writes
    it: a synthetic file, no job (the model's status cost; the median of 5 reads)."""
    from hpclaunch.runtime.node.noderecord import _without_windows

    rec = {"rank": 0, "step": 399, "phase": "optimizer", "t": 1e9, "host": "gpu-node-0123", "pid": 123456,
           "win": [10, 1.0, 0.1], "sf": 1.5, "hw": [[i, 12.345, 1.234] for i in range(21)]}
    out: list[dict[str, object]] = []
    for windows in (True, False):
        for n in counts:
            with tempfile.TemporaryDirectory() as tmp:
                run = RunFiles(Path(tmp))
                nodes = {str(k): {"node": str(k), "host": f"n{k}", "restart": 0, "started": 1e9, "at": 1e9,
                                  "ranks": {str(ranks * k + r): {**rec, "rank": ranks * k + r} for r in range(ranks)}}
                         for k in range(n)}
                if not windows:
                    nodes = {k: _without_windows(v) for k, v in nodes.items()}
                run.progress.mkdir()
                run.node_record(0, 0).write_text(json.dumps({**nodes.pop("0"), "nodes": nodes}))
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    found = run.progress_records(0)
                    times.append(time.perf_counter() - t0)
                assert len(found) == n * ranks
                size = run.node_record(0, 0).stat().st_size
                out.append({"nodes": n, "ranks": n * ranks, "hw": windows, "bytes": size,
                            "read_s": round(statistics.median(times), 4)})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="1,4,16,64", help="node counts, comma-separated")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale-latest.json")
    p.add_argument("--health-allreduce", choices=["auto", "on", "off"], default="auto",
                   help="the health check's all-reduce (each node imports torch): auto = on up to 16 nodes")
    p.add_argument("--no-trace", action="store_true", help="the times only (no strace run)")
    p.add_argument("--checkout", type=Path, help="measure the hpclaunch of this tree (e.g. `git archive` of a "
                   "commit, outside /tmp), not this checkout's")
    p.add_argument("--traces", type=Path, help="where strace writes (default: the work folder; ~100 MB per 16 "
                   "nodes that import torch), e.g. /dev/shm/scale-traces when the disk is short")
    p.add_argument("--min-free-gib", type=float, default=1.0, help="the health check's free-space floor")
    p.add_argument("--label", default="", help="what is measured, in the result (e.g. 'baseline d9d6d77')")
    p.add_argument("--keep", type=Path, help="keep the jobs' homes, run directories and traces in this folder")
    p.add_argument("--plot", type=Path, nargs="+", metavar="RESULT.json",
                   help="only draw these results into docs/scale.png (no job)")
    p.add_argument("--records-model", metavar="N,N", help="only time reading node 0's file of N nodes x 8 ranks "
                   "(synthetic, no job; with and without the ranks' windows) and print one JSON line per case")
    args = p.parse_args()
    if args.records_model:
        for case in records_model([int(x) for x in args.records_model.split(",")]):
            print(json.dumps(case))
        return 0
    if args.plot:
        plot(args.plot, REPO / "docs" / "scale.png")
        return 0
    counts = [int(x) for x in args.nodes.split(",")]
    if args.checkout:
        PYTHON[0] = str(overlay(args.checkout.resolve()) / "bin" / "python")
    nodes = scale_nodes()
    if not nodes or max(counts) > len(nodes):
        raise SystemExit(f"the dev cluster's partition scale has {len(nodes)} node(s), {max(counts)} are asked: "
                         f"scripts/dev-cluster.sh up --nodes {max(counts) + 4}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="hpclaunch-scale-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for n in counts:
            exclude = len(nodes) >= n + 4
            allreduce = args.health_allreduce == "on" or (args.health_allreduce == "auto" and n <= 16)
            profile = work / f"scale-{n}.yaml"
            venv = f"python: {{venv: {Path(PYTHON[0]).parents[1]}}}\n" if args.checkout else ""
            profile.write_text(PROFILE.format(max_nodes=len(nodes), allreduce=str(allreduce).lower(), python=venv,
                                              min_free=args.min_free_gib))
            home = work / f"home-{n}"
            row: dict[str, object] = {"nodes": n, "ranks": n, "test_nodes_excluded": exclude,
                                      **timed_run(home, profile, n, exclude)}
            if not args.no_trace:
                row.update(traced_run(home, profile, n, exclude, nodes, args.traces or work))
                row["shared_ops_per_node_10s"] = per_node(row)
            rows.append(row)
            print(f"{n} node(s): start-up {row['startup_s']} s, status {row['status_s']} s", file=sys.stderr,
                  flush=True)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    if args.checkout:
        commit, dirty = f"{args.checkout} (not this checkout's {commit})", False
    result = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "label": args.label,
              "commit": commit, "dirty": dirty,
              "machine": f"{os.cpu_count()} cores, dev cluster of {len(nodes)} nodes (scripts/dev-cluster.sh)",
              "stub": {"steps": STEPS, "step_s": STEP_S, "ranks_per_node": 1}, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
