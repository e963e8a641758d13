"""The node-local Python environment, measured (issue 24; figures in docs/benchmarks.md#node-local-start).

1. Staging cost: packing this python's environment into the store (``envstage pack``: cold into a fresh cache
   with --cold-pack, else whatever the store holds) and copying it to a node's scratch (``envstage node``),
   cold (a fresh scratch folder) then warm (the hash already there).
2. File-metadata system calls on the shared environment's path (this python's sys.prefix) that a rank of the
   tiny GPT-2 makes from its process start to its first step: the same one-rank job (local profile, 1n1g, one
   step) under ``strace -f``, with the environment shared and with ``--set python.stage=node-local``. The rank is
   the process torchrun starts (rank_exec), its threads and its child (the recipe's train.py); the trace is cut at
   rank 0's "first_step" timeline stamp.

    flock /tmp/hpclaunch-heavy.lock python benchmarks/nodelocal_start.py [--cold-pack]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILE_CALLS = re.compile(r"^(\w+)\((?:AT_FDCWD, |\d+, )?\"([^\"]*)\"")
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - t0, proc.stdout.strip()


def staging(store: Path, cold_pack: bool) -> list[tuple[str, float]]:
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        cache = Path(tmp) / "envs" if cold_pack else store / "envs"
        stage = [sys.executable, "-m", "hpclaunch.runtime.node.envstage"]
        seconds, key = _timed([*stage, "pack", "--cache", str(cache)])
        rows.append(("pack (mksquashfs into the store)" + (", cold" if cold_pack else ", as the store was"),
                     seconds))
        rows.append(("pack again (hash already in the store: the environment's file list hashed)",
                     _timed([*stage, "pack", "--cache", str(cache)])[0]))
        node = [*stage, "node", "--cache", str(cache), "--key", key, "--scratch", str(Path(tmp) / "scratch")]
        rows.append(("node copy, cold (unsquashfs + relocation)", _timed(node)[0]))
        rows.append(("node copy, warm (hash on the node: every file's size checked)", _timed(node)[0]))
    return rows


def traced_rank(home: Path, trace: Path, *sets: str) -> list[str]:
    """The file system calls of the rank process (and its threads and children) from its exec to its first step."""
    cmd = ["strace", "-f", "-ff", "-ttt", "-qq", "-s", "200", "-e", "trace=%file,write,clone,clone3,fork,vfork",
           "-o", str(trace),
           sys.executable, "-m", "hpclaunch.cli.main", "submit", str(REPO / "recipes" / "gpt2"), "--profile", "local",
           "--preset", "tiny", "--layout", "1n1g", "--set", "train.max_steps=1", "--set", "train.eval_steps=1",
           "--set", "train.save_every=0", *sets, "--follow"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**ENV, "HPCLAUNCH_HOME": str(home)}, timeout=900)
    if proc.returncode:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    per_pid = {int(f.name.rsplit(".", 1)[1]): [x.split(" ", 1) for x in f.read_text(errors="replace").splitlines()]
               for f in trace.parent.glob(f"{trace.name}.*")}
    rank = next((pid for pid, lines in per_pid.items() if lines and lines[0][1].startswith("execve(")
                 and "hpclaunch.runtime.node.rank_exec" in lines[0][1]), None)
    if rank is None:
        raise SystemExit(f"no rank process found in {trace}.*")
    tree, todo = [], [rank]  # the rank's process, its threads and its child (the recipe's script), theirs
    while todo:
        tree.append(todo.pop())
        todo += [int(m.group(1)) for _, x in per_pid.get(tree[-1], [])
                 if x.startswith(("clone", "fork", "vfork")) and (m := re.search(r"= (\d+)$", x))]
    lines = [(float(t), x) for pid in tree for t, x in per_pid.get(pid, [])]
    end = min((t for t, x in lines if x.startswith("write(") and "first_step" in x), default=float("inf"))
    return [x for t, x in lines if t < end and not x.startswith(("write(", "clone", "fork", "vfork"))]


def on_path(calls: list[str], prefix: str) -> int:
    return sum(1 for c in calls if (m := FILE_CALLS.match(c)) and m.group(2).startswith(prefix))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cold-pack", action="store_true", help="pack into a fresh cache (minutes for GBs)")
    parser.add_argument("--store", type=Path, default=Path.home() / ".hpclaunch" / "assets")
    args = parser.parse_args()
    env = sys.prefix
    print(f"environment: {env}")
    for name, seconds in staging(args.store, args.cold_pack):
        print(f"| {name} | {seconds:.2f} s |", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        counts = {}
        for label, sets in (("shared", ()), ("node-local", ("--set", "python.stage=node-local"))):
            folder = Path(tmp) / label
            folder.mkdir()
            calls = traced_rank(folder / "home", folder / "trace", *sets)
            counts[label] = (on_path(calls, env + "/"), len(calls))
            print(f"| {label} | {counts[label][0]} calls on {env} | {counts[label][1]} file calls in all |",
                  flush=True)
    shared, local = counts["shared"][0], counts["node-local"][0]
    print(json.dumps({"shared": counts["shared"], "node_local": counts["node-local"],
                      "ratio": round(shared / max(local, 1), 1)}))


if __name__ == "__main__":
    main()
