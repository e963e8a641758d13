"""Node health before step 0: ``python -m hpclaunch.runtime.node.health check|verdict|--failed-nodes``.

The job script (templates/blocks/health.sh.j2) runs ``check`` once per node (one task per node), then
``verdict`` once, before the launch:

``check`` (on each node) writes RUN_DIR/health/node-<N>.restart-<R>.json with one entry per check:

    devices      the devices the allocation gave this node (HPCLAUNCH_DEVICES, else the accelerator's visible
                 devices variable) against the ranks per node (``--expect-devices``), and, where a vendor tool
                 is on PATH, against the devices it sees
    device_health  the vendor tool's health (hpclaunch/runtime/node/devhealth.py: nvidia-smi -q, npu-smi info);
                 Xid lines in the kernel log, where it can be read, are noted
    free_space   free GiB of the run directory's filesystem and of node-local scratch vs ``--min-free-gib``
    allreduce    the links between nodes in ceil(log2 N) rounds of pairwise exchanges (recursive doubling: on CPU
                 over TCP, hpclaunch/runtime/node/tcplinks.py, gloo's transport without importing torch; on
                 devices hpclaunch/runtime/train/linkcheck.py, run with this python through the profile's
                 backend): the median bandwidth of this node's links in GB/s vs ``--min-allreduce-gbps`` (0:
                 measured, never failing), and the partners that did not answer; one node: nothing to measure

``verdict`` (once, in the job script) reads every node's file, writes RUN_DIR/health/restart-<R>.json
(``ok``, ``nodes``, ``failed``: one {node, host, check, detail} per failing check; a node without a file
failed check ``result``), prints one line per failure, writes RUN_DIR/stop_reason and exits with
``HEALTH_EXIT_CODE`` when a node failed. The check runs on every node of the allocation, spare nodes
(``submit --spare-nodes``) included: when nodes fail and enough healthy ones remain (``verdict --spares K``), the
first healthy nodes take the launch at the same world size and ``verdict`` writes them to
RUN_DIR/health/launch-nodes.restart-<R> (line 1: the launch's nodes, line 2: the nodes dropped) instead of
ending the job. ``HPCLAUNCH_INJECT=sick:NODE:0`` fails node NODE of the allocation (0-based, spares
included) on purpose, to rehearse it. ``--failed-nodes`` prints the failing hosts of the newest checked
restart, comma-separated (srun's ``--exclude`` form), for whatever replaces them. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hpclaunch.runtime.node import devhealth, tcplinks
from hpclaunch.runtime.node.sampler import DEVICE_TOOLS
from hpclaunch.state.runfiles import ENV_RESTART, RunFiles

HEALTH_EXIT_CODE = 75  # the job script's exit code when a node failed its health check (EX_TEMPFAIL)
GIB = 1024 ** 3
VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "MUSA_VISIBLE_DEVICES")
HEALTH_TOOLS: dict[str, tuple[list[str], Callable[[str], list[dict[str, Any]]]]] = {
    "nvidia-smi": (["-q"], devhealth.parse_nvidia_q),
    "npu-smi": (["info"], devhealth.parse_npu_health),
}
Check = dict[str, Any]


def _check(name: str, ok: bool | None, detail: str, **extra: Any) -> Check:
    """ok: True passed, False failed, None skipped (nothing to check here)."""
    return {"name": name, "ok": ok, "detail": detail, **extra}


def allocated_devices(env: dict[str, str]) -> list[str] | None:
    """The device indices the scheduler gave this node (HPCLAUNCH_DEVICES, else a visible-devices variable)."""
    for var in ("HPCLAUNCH_DEVICES", *VISIBLE_VARS):
        text = env.get(var, "").strip()
        if text:
            return [d.strip() for d in text.split(",") if d.strip()]
    return None


def _run(tool: str, args: list[str]) -> tuple[int, str]:
    path = shutil.which(tool)
    if path is None:
        return -1, ""
    try:
        proc = subprocess.run([path, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout)


def check_devices(expect: int | None, env: dict[str, str]) -> Check:
    given = allocated_devices(env)
    if expect is None:
        return _check("devices", None, "no devices asked of the scheduler")
    if given is None:
        return _check("devices", None, "the scheduler set no device variable (HPCLAUNCH_DEVICES, *_VISIBLE_DEVICES): "
                      "not checked")
    if len(given) != expect:
        return _check("devices", False, f"the allocation gave {len(given)} device(s) ({','.join(given)}), the job "
                      f"runs {expect} rank(s) per node", allocated=given)
    for tool, args, parse in DEVICE_TOOLS:
        rc, out = _run(tool, args)
        if rc == -1:
            continue
        seen = sorted(str(d["index"]) for d in parse(out)) if rc == 0 else []
        missing = [d for d in given if d not in seen]
        if missing:
            return _check("devices", False, f"{tool} does not see allocated device(s) {','.join(missing)} "
                          f"(it sees {','.join(seen) or 'none'})", allocated=given, seen=seen)
        return _check("devices", True, f"{len(given)} allocated, all seen by {tool}", allocated=given, seen=seen)
    return _check("devices", True, f"{len(given)} allocated ({','.join(given)}); no vendor tool on this node to "
                  "ask which it sees", allocated=given)


def check_device_health() -> Check:
    for tool, (args, parse) in HEALTH_TOOLS.items():
        rc, out = _run(tool, args)
        if rc == -1:
            continue
        if rc != 0:
            return _check("device_health", False, f"`{tool} {' '.join(args)}` failed (exit {rc}): "
                          f"{out.strip()[-200:]}")
        devices = parse(out)
        bad = [f"{d['device']}: {'; '.join(d['problems'])}" for d in devices if d["problems"]]
        xids = _xids() if tool == "nvidia-smi" else []
        note = f"; kernel log: Xid {', '.join(str(x['xid']) for x in xids[-5:])}" if xids else ""
        if bad:
            return _check("device_health", False, " | ".join(bad) + note, devices=devices, xids=xids)
        return _check("device_health", True, f"{len(devices)} device(s) healthy per {tool}{note}",
                      devices=devices, xids=xids)
    return _check("device_health", None, "no vendor health tool on this node (nvidia-smi, npu-smi)")


def _xids() -> list[dict[str, Any]]:
    rc, out = _run("dmesg", [])
    return devhealth.parse_xids(out) if rc == 0 else []


def check_free_space(places: dict[str, Path], min_gib: float) -> Check:
    free: dict[str, float] = {}
    low = []
    for label, path in places.items():
        try:
            gib = shutil.disk_usage(path).free / GIB
        except OSError as exc:
            low.append(f"{label} {path}: cannot read ({exc.strerror})")
            continue
        free[label] = round(gib, 2)
        if gib < min_gib:
            low.append(f"{label} {path} has {gib:.1f} GiB free < health.min_free_gib {min_gib:g}")
    words = ", ".join(f"{label} {gib:.1f} GiB" for label, gib in free.items())
    return _check("free_space", not low, "; ".join(low) or f"free: {words}", free_gib=free)


def _rendezvous(env: dict[str, str]) -> tuple[str, str]:
    """Where the nodes meet for the all-reduce: the head node (its IPv4 address; the launch's rendezvous is not set
    up yet) and a port of this job and restart in 20000-29999, away from the one the launch derives (on CPU each node
    listens on it + its index, tcplinks.NODE_PORTS)."""
    # this job's head node (the job script sets it); MASTER_* may be a previous job's (a --retries resubmission
    # is queued with the environment of the job it replaces)
    head = env.get("HPCLAUNCH_HEAD_NODE") or "127.0.0.1"
    try:
        head = socket.gethostbyname(head)
    except OSError:
        pass
    key = f"{env.get('HPCLAUNCH_JOB_ID', '')}.{env.get(ENV_RESTART, '0')}.health".encode()
    return head, str(20000 + zlib.crc32(key) % 10000)


def check_allreduce(env: dict[str, str], mib: int, timeout: float, min_gbps: float, nodes: int = 0) -> Check:
    """The links to this node's partners, in ceil(log2 N) rounds (hpclaunch/runtime/train/linkcheck.py, in a child
    process with this python: it imports torch, this module may not), over `nodes` nodes (every node of the health
    check's step; 0: HPCLAUNCH_NNODES). The node fails when most of its partners could not reach it, or when the
    median of its links is below `min_gbps`; a partner that did not answer is named (its own check says why)."""
    nodes = nodes or int(env.get("HPCLAUNCH_NNODES", "1") or 1)
    if nodes < 2:
        return _check("allreduce", None, "one node: no links between nodes to measure")
    addr, port = _rendezvous(env)
    hosts = [h for h in env.get("HPCLAUNCH_ALLOCATION", "").split(",") if h]
    rounds = max(1, (nodes - 1).bit_length())
    found: dict[str, Any]
    if (env.get("HPCLAUNCH_ACCELERATOR") or "cpu") == "cpu" and len(hosts) == nodes:
        # gloo's links are TCP: measured as they are with the standard library, without importing torch
        node = int(env.get("HPCLAUNCH_NODE_RANK", "0") or 0)
        found = tcplinks.measure(node, hosts, int(port), mib * 1024 * 1024, 3, timeout)
    else:
        child = {**env, "RANK": env.get("HPCLAUNCH_NODE_RANK", "0"), "WORLD_SIZE": str(nodes), "LOCAL_RANK": "0",
                 "MASTER_ADDR": addr, "MASTER_PORT": port}
        cmd = [sys.executable, "-m", "hpclaunch.runtime.train.linkcheck", "--mib", str(mib), "--timeout",
               f"{timeout:g}"]
        limit = timeout * (rounds + 1) + 120  # the meeting, then at worst a partner's timeout in every round
        try:
            proc = subprocess.run(cmd, env=child, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return _check("allreduce", False, f"no answer from the link check across {nodes} nodes in {limit:g} s")
        if proc.returncode != 0:
            if "No module named 'torch'" in proc.stderr:
                return _check("allreduce", None, "torch is not importable in this python: not measured")
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return _check("allreduce", False, f"the link check across {nodes} nodes failed (exit {proc.returncode}): "
                          f"{last[-300:]}")
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    pairs, lost = found["pairs"], found["failed_partners"]
    gbps = found["busbw_gbps"]
    words = (f"{mib} MiB with {len(pairs)} partner(s) in {found['rounds']} round(s) over {nodes} nodes "
             f"({found['backend']})")
    if len(lost) * 2 > len(pairs) or gbps is None:
        return _check("allreduce", False, f"{words}: no answer from node(s) {', '.join(map(str, lost))}", **found)
    ok = gbps >= min_gbps
    words += f": bus bandwidth {gbps:.3g} GB/s (the median of its links)"
    words += f"; no answer from node(s) {', '.join(map(str, lost))}" if lost else ""
    return _check("allreduce", ok, words + ("" if ok else f" < health.min_allreduce_gbps {min_gbps:g}"), **found)


def run_checks(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """Every check of this node, the all-reduce last (every node joins it, also one whose own checks failed)."""
    t0 = time.time()
    run = RunFiles.from_env(env)
    scratch = Path(args.scratch or env.get("TMPDIR") or "/tmp")
    checks = [check_devices(args.expect_devices, env), check_device_health(),
              check_free_space({"run root": run.root, "scratch": scratch}, args.min_free_gib)]
    if args.allreduce:
        checks.append(check_allreduce(env, args.allreduce_mib, args.timeout, args.min_allreduce_gbps, args.nodes))
    node = int(env.get("HPCLAUNCH_NODE_RANK", "0") or 0)
    if _sick(env, node):
        checks.append(_check("injected", False, f"HPCLAUNCH_INJECT=sick:{node}:0 (a rehearsal: this node fails)"))
    # which python ran the check (the job script picks the node's copy of the environment, else the OS's python,
    # else the shared one: hpclaunch/submission/render.py node_python)
    return {"node": node, "host": socket.gethostname(), "python": sys.executable,
            "ok": all(c["ok"] is not False for c in checks), "checks": checks,
            "started": round(t0, 3), "seconds": round(time.time() - t0, 3)}


def _sick(env: dict[str, str], node: int) -> bool:
    """Whether HPCLAUNCH_INJECT names this node of the allocation `sick` (a malformed list was refused at submit)."""
    from hpclaunch.config.faults import ENV, parse_list

    try:
        return any(f.kind == "sick" and f.rank == node for f in parse_list(env.get(ENV, ""))) if env.get(ENV) else False
    except ValueError:
        return False


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _restart(env: dict[str, str]) -> int:
    return int(env.get(ENV_RESTART, "0") or 0)


def check_main(args: argparse.Namespace, env: dict[str, str]) -> int:
    rec = run_checks(args, env)
    _write(RunFiles.from_env(env).health_node(rec["node"], _restart(env)), rec)
    words = "; ".join(f"{c['name']} {'ok' if c['ok'] else 'FAILED' if c['ok'] is False else 'skipped'}: "
                      f"{c['detail']}" for c in rec["checks"])
    print(f"hpclaunch: health {rec['host']} (node {rec['node']}, {rec['seconds']:.1f}s): {words}", flush=True)
    return 0  # the verdict, once every node wrote its file, decides


def verdict(run: RunFiles, restart: int, nodes: int, hosts: Sequence[str] = ()) -> dict[str, Any]:
    """Every node's record of this restart merged: ok, nodes, failed (node, host, check, detail); `hosts`, the
    allocation's nodes in order, names a node that wrote no record."""
    records, failed = [], []
    for node in range(nodes):
        try:
            rec = json.loads(run.health_node(node, restart).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            failed.append({"node": node, "host": hosts[node] if node < len(hosts) else None, "check": "result",
                           "detail": "no health result from this node (its task did not start or died)"})
            continue
        records.append(rec)
        failed += [{"node": node, "host": rec.get("host"), "check": c["name"], "detail": c["detail"]}
                   for c in rec.get("checks", []) if c.get("ok") is False]
    return {"restart": restart, "ok": not failed, "nodes": records, "failed": failed,
            "failed_hosts": sorted({f["host"] for f in failed if f["host"]})}


def _replace(run: RunFiles, restart: int, found: dict[str, Any], hosts: Sequence[str], need: int) -> bool:
    """With spares: the first `need` healthy nodes of the allocation take the launch (written for the job
    script); False when too few are healthy or a failing node is not known by name."""
    if any(f["host"] is None for f in found["failed"]):
        return False
    healthy = [h for h in hosts if h not in found["failed_hosts"]]
    if len(healthy) < need:
        return False
    found["launch_nodes"] = healthy[:need]
    path = run.health_launch_nodes(restart)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(healthy[:need]) + "\n" + ",".join(found["failed_hosts"]) + "\n", encoding="utf-8")
    return True


def verdict_main(env: dict[str, str], spares: int = 0) -> int:
    run, restart = RunFiles.from_env(env), _restart(env)
    need = int(env.get("HPCLAUNCH_NNODES", "1") or 1)
    hosts = [h for h in env.get("HPCLAUNCH_ALLOCATION", "").split(",") if h]
    found = verdict(run, restart, need + spares, hosts)
    replaced = not found["ok"] and spares > 0 and _replace(run, restart, found, hosts, need)
    _write(run.health_summary(restart), found)
    if found["ok"]:
        print(f"hpclaunch: node health: {len(found['nodes'])} node(s) passed ({run.health_summary(restart)})")
        return 0
    if replaced:
        for f in found["failed"]:
            print(f"hpclaunch: warning: node {f['host']} (node {f['node']}) failed health check {f['check']}: "
                  f"{f['detail']}", file=sys.stderr, flush=True)
        print(f"hpclaunch: node health: {','.join(found['failed_hosts'])} failed; spare node(s) take their place: "
              f"the launch runs on {','.join(found['launch_nodes'])}", flush=True)
        return 0
    lines = [f"node {f['host'] or '?'} (node {f['node']}) failed health check {f['check']}: {f['detail']}"
             for f in found["failed"]]
    for line in lines:
        print(f"hpclaunch: error: {line}", file=sys.stderr, flush=True)
    print(f"hpclaunch: error: node health check failed before step 0: the job ends (exit {HEALTH_EXIT_CODE}); "
          f"failing nodes: {','.join(found['failed_hosts']) or '?'}", file=sys.stderr, flush=True)
    try:
        run.stop_reason.write_text("node health check failed before step 0: " + "; ".join(lines) + "\n",
                                   encoding="utf-8")
    except OSError:
        pass
    return HEALTH_EXIT_CODE


def failed_nodes(run: RunFiles) -> list[str]:
    """The failing hosts of the newest restart that has a verdict (none: [])."""
    newest = run.health_summaries()
    if not newest:
        return []
    found = json.loads(newest[-1].read_text(encoding="utf-8"))
    return [str(h) for h in found.get("failed_hosts", [])]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.health", description=__doc__.split("\n")[0])
    p.add_argument("mode", nargs="?", choices=("check", "verdict"), help="check: this node; verdict: every node")
    p.add_argument("--nodes", type=int, default=0, help="check: the nodes checked together (default HPCLAUNCH_NNODES)")
    p.add_argument("--spares", type=int, default=0, help="verdict: spare nodes in the allocation after the launch's")
    p.add_argument("--failed-nodes", action="store_true", help="print the failing hosts of the newest verdict")
    p.add_argument("--run-dir", help="the run directory (default: HPCLAUNCH_RUN_DIR)")
    p.add_argument("--expect-devices", type=int, help="devices the allocation must give each node")
    p.add_argument("--min-free-gib", type=float, default=0.0)
    p.add_argument("--scratch", help="node-local scratch (default: TMPDIR, else /tmp)")
    p.add_argument("--no-allreduce", dest="allreduce", action="store_false")
    p.add_argument("--allreduce-mib", type=int, default=16)
    p.add_argument("--min-allreduce-gbps", type=float, default=0.0)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds the all-reduce may take to start and run")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    env = dict(os.environ)
    if args.run_dir:
        env["HPCLAUNCH_RUN_DIR"] = args.run_dir
    if args.failed_nodes:
        print(",".join(failed_nodes(RunFiles.from_env(env))))
        return 0
    if args.mode == "check":
        return check_main(args, env)
    if args.mode == "verdict":
        return verdict_main(env, args.spares)
    _parser().print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
