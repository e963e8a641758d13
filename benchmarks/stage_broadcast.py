"""Shared-store bytes read at start, per node count: each node copying the packed environment from the store
(``node_broadcast: false``) against Slurm's broadcast (``sbcast``, the default); docs/fast-start.md and
docs/benchmarks.md#one-read-whatever-the-node-count (issue 38.3).

On the dev cluster (scripts/dev-cluster.sh), for N nodes in --nodes: the tiny GPT-2, one step, N x 1 rank,
``python.stage=node-local``, on a profile of its own: a private asset store (so only this job reads it) and a fresh
node scratch per job (every node cold). Every process the cluster's slurmd daemons start is traced
(``strace -f --seccomp-bpf`` on each slurmd: the batch script, srun and its broadcast, every step, every rank) for
the reads of files under the store (read, pread64, readv, preadv and mmap: sbcast maps the file it sends);
counted: bytes and files, split into envs/ (the packed environment) and the rest (the generated tiny assets the
ranks read). The timeline's ``env staging`` span is the time the copies took. A warm-up job packs the environment
and generates the assets first (once per content: not start-up).

    flock /tmp/hpclaunch-heavy.lock python benchmarks/stage_broadcast.py [--nodes 1,2,4] [--json FILE]

It traces other jobs' processes too while it runs (their reads are not counted: they do not read this store).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.state import timeline  # noqa: E402
from hpclaunch.state.runfiles import RunFiles  # noqa: E402

CALL = re.compile(r"^(\d+)\s+(read|pread64|readv|preadv|preadv2|mmap|openat)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+)")
UNFINISHED = re.compile(r"^(\d+)\s+(read|pread64|readv|preadv|preadv2|mmap|openat)\((.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>.*\)\s+=\s+(-?\d+|0x[0-9a-f]+)")
FD_PATH = re.compile(r"(\d+)<([^>]*)>")


def profile(folder: Path, store: Path, scratch: Path, broadcast: bool) -> Path:
    text = (REPO / "cluster_profiles" / "dev-slurm.yaml").read_text()
    text = re.sub(r"assets:\n  store: [^\n]*\n", f"assets:\n  store: {store}\n", text)
    path = folder / f"dev-slurm-{'bcast' if broadcast else 'pernode'}-{scratch.name}.yaml"
    path.write_text(text + f"node_scratch: {scratch}\nnode_broadcast: {str(broadcast).lower()}\n")
    return path


def submit(home: Path, prof: Path, nodes: int) -> Path:
    cmd = [sys.executable, "-m", "hpclaunch.cli.main", "submit", str(REPO / "recipes" / "gpt2"), "--profile",
           str(prof), "--preset", "tiny", "--layout", f"{nodes}n1g", "--set", "python.stage=node-local",
           "--set", "train.max_steps=1", "--set", "train.eval_steps=1", "--set", "train.save_every=0", "--follow"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "HPCLAUNCH_HOME": str(home), "PYTHONPATH": str(REPO)})
    found = re.search(r"run directory: (\S+)", proc.stdout + proc.stderr)
    if proc.returncode or not found:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return Path(found.group(1))


def slurmd_pids() -> list[int]:
    """The dev cluster's node daemons (slurmd -N node1 ... node4; another cluster's on this machine too: harmless)."""
    out = subprocess.run(["pgrep", "-a", "-x", "slurmd"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if re.search(r"-N node[1-4]$", line)]


def calls(trace: Path):  # type: ignore[no-untyped-def]
    """(call, its arguments, what it returned) per traced call; a call strace split in two (another thread ran in
    between: '<unfinished ...>', then '<... read resumed>') joined again."""
    open_calls: dict[tuple[str, str], str] = {}
    with open(trace, errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if m := CALL.match(line):
                yield m.group(2), m.group(3), m.group(4)
            elif m := UNFINISHED.match(line):
                open_calls[(m.group(1), m.group(2))] = m.group(3)
            elif (m := RESUMED.match(line)) and (args := open_calls.pop((m.group(1), m.group(2)), None)) is not None:
                yield m.group(2), args, m.group(3)


def traced(trace: Path, run):  # type: ignore[no-untyped-def]
    """run() with every slurmd (and what it starts) traced into `trace`."""
    args = ["strace", "-f", "--seccomp-bpf", "-qq", "-y", "-s", "0", "-e", "signal=none",
            "-e", "trace=read,pread64,readv,preadv,preadv2,mmap,openat", "-o", str(trace)]
    for pid in slurmd_pids():
        args += ["-p", str(pid)]
    tracer = subprocess.Popen(args, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached (strace prints nothing with -qq: give it its second)
    try:
        return run()
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)


def store_reads(trace: Path, store: Path) -> dict[str, dict[str, int]]:
    """Bytes and files read under `store`, by its top folder (envs, generated, ...)."""
    prefix = str(store) + "/"
    out: dict[str, dict[str, int]] = {}
    files: dict[str, set[str]] = {}
    for call, args, ret in calls(trace):
        fds = [p for _, p in FD_PATH.findall(args) if p.startswith(prefix)]
        if not fds or ret.startswith("-"):
            continue
        path = fds[0]
        top = path[len(prefix):].split("/", 1)[0]
        row = out.setdefault(top, {"bytes": 0, "files": 0})
        if call == "mmap":
            row["bytes"] += int(args.split(",")[1])
        elif call != "openat":
            row["bytes"] += int(ret)
        if path not in files.setdefault(top, set()):
            files[top].add(path)
            row["files"] += 1
    return out


def staging_span(run_dir: Path) -> float | None:
    (entry,) = timeline.load(RunFiles(run_dir))
    phases = entry["phases"]
    if "env_staged" not in phases or "health_checked" not in phases:
        return None
    return round(phases["env_staged"] - phases["health_checked"], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hpclaunch-bcast-bench-") as tmp:
        folder = Path(tmp)
        store, home = folder / "store", folder / "home"
        warm_up = submit(home, profile(folder, store, folder / "scratch-warmup", True), 1)
        image = next((store / "envs").glob("*.sqfs"))
        print(f"warm-up {warm_up}: image {image.stat().st_size / 2**20:.0f} MiB", flush=True)
        for nodes in map(int, args.nodes.split(",")):
            for broadcast in (False, True):
                scratch = folder / f"scratch-{nodes}-{int(broadcast)}"
                prof = profile(folder, store, scratch, broadcast)
                trace = folder / f"trace-{nodes}-{int(broadcast)}"
                run_dir = traced(trace, lambda: submit(home, prof, nodes))  # noqa: B023
                reads = store_reads(trace, store)
                env = reads.get("envs", {"bytes": 0, "files": 0})
                other = {"bytes": sum(r["bytes"] for k, r in reads.items() if k != "envs"),
                         "files": sum(r["files"] for k, r in reads.items() if k != "envs")}
                row = {"nodes": nodes, "copy": "broadcast" if broadcast else "per node",
                       "env_read_bytes": env["bytes"], "env_read_files": env["files"],
                       "image_copies": round(env["bytes"] / image.stat().st_size, 3),
                       "asset_read_bytes": other["bytes"], "asset_read_files": other["files"],
                       "env_staging_s": staging_span(run_dir), "run_dir": str(run_dir)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                trace.unlink()
                shutil.rmtree(scratch, ignore_errors=True)  # 1.8 GB per node: the disk is shared
    print("| nodes | copy | env image read from the store | copies of the image | assets read | env staging |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['nodes']} | {r['copy']} | {r['env_read_bytes'] / 2**20:.0f} MiB ({r['env_read_files']} files) "
              f"| {r['image_copies']} | {r['asset_read_bytes'] / 2**20:.1f} MiB ({r['asset_read_files']} files) "
              f"| {r['env_staging_s']} s |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
