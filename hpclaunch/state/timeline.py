"""A job's start-up timeline: where the time goes from submit to the first training step, per restart.

``RUN_DIR/timeline.jsonl`` holds one JSON line per phase and restart, appended, never rewritten:

    {"phase": "started", "restart": 0, "job": "12345", "t": 1712345678.123456789}

    phase            written by                                  when
    submitted        hpclaunch submit (each sweep element too),  the scheduler was asked to queue the job
                     hpclaunch resume, the job script for a
                     --retries resubmission
    started          the job script                              its first line runs
    env_ready        the job script                              modules loaded, python environment active
    env_packed       the job script                              the python environment packed (python.stage
                                                                 node-local: its key known before the health check)
    health_checked   the job script                              every node's health check is done (health.enabled;
                                                                 the span also holds the few shell lines before it)
    env_staged       the job script                              every node holds its node-local copy of the python
                                                                 environment (python.stage node-local; packing it
                                                                 first when its hash is new: docs/fast-start.md)
    env_fallback     the job script                              instead of env_staged: a node could not stage it and
                                                                 python.stage_fallback shared runs the ranks from
                                                                 the shared environment
    launched         the job script                              its own work done, right before the launch
    container_started node 0's container-run.sh (Charliecloud)   the image is on the node and its first process
                                                                 runs (unpacking a SquashFS image included)
    ranks_started    rank 0's wrapper (rank_exec, msrun_worker)  rank 0's process began
    imports_done     runtime.distributed.init_distributed        the script's imports are done (torch, the runtime)
    rendezvous_done  runtime.distributed.init_distributed        the process group is up
    model_loaded     runtime.build.load_tokenizer_and_model      tokenizer and model loaded
    data_ready       runtime.data.train_and_eval_batches         the batches are ready
    first_step       runtime.loop.train                          the first optimizer step is done
    finished         the job script                              the launch returned, or the job requeues itself

The job script stamps with ``date +%s.%N`` (no Python starts for it); the runtime stamps from rank 0 only.
Standard library only: `status` reads it, and the job writes it before torch is imported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hpclaunch.state.runfiles import ENV_RESTART, ENV_RUN_DIR, RunFiles, append_once, read_json_lines

PHASES = ("submitted", "started", "env_ready", "env_packed", "health_checked", "env_staged", "env_fallback",
          "launched", "container_started", "ranks_started", "imports_done", "rendezvous_done", "model_loaded",
          "data_ready", "first_step", "finished")
# The span that ends at each phase (it starts at the phase before it that was stamped); `status` writes
# each name with spaces.
SPANS = {"started": "queued", "env_ready": "env", "env_packed": "env_pack", "health_checked": "health",
         "env_staged": "env_staging", "env_fallback": "env_staging_failed",
         "launched": "job_script", "container_started": "container", "ranks_started": "launcher",
         "imports_done": "imports", "rendezvous_done": "rendezvous", "model_loaded": "model_load",
         "data_ready": "data", "first_step": "first_step", "finished": "training"}
# The spans that make up the start-up (from the job script's start to the end of the first step).
STARTUP = ("env_ready", "env_packed", "health_checked", "env_staged", "env_fallback", "launched",
           "container_started", "ranks_started", "imports_done", "rendezvous_done", "model_loaded", "data_ready",
           "first_step")

_MARKED: set[str] = set()


def line(phase: str, restart: int, job: str, t: float) -> str:
    return json.dumps({"phase": phase, "restart": restart, "job": job, "t": round(t, 6)}) + "\n"


def append(path: Path, phase: str, *, restart: int, job: str, t: float) -> None:
    """One line in one write (O_APPEND): stamps from the job script and several processes never mix."""
    append_once(path, line(phase, restart, job, t).encode())


def submitted(run_dir: Path, job: str, t: float, restart: int = 0) -> None:
    """hpclaunch submit: the scheduler was asked at `t` and answered with `job` (its first restart: 0, or the one
    `hpclaunch resume` gave it). The job is queued by now: a stamp that cannot be written is left out rather
    than failing the submit."""
    try:
        append(RunFiles(run_dir).timeline, "submitted", restart=restart, job=job, t=t)
    except OSError:
        pass


def mark(phase: str, environ: dict[str, str] | None = None) -> None:
    """Inside a job: stamp `phase` now, from rank 0 only and once per process; outside a job (no
    HPCLAUNCH_RUN_DIR) nothing. Never fails the job: a stamp that cannot be written is left out."""
    import time

    env = os.environ if environ is None else environ
    rank = env.get("RANK", env.get("RANK_ID", "0")) or "0"
    if phase in _MARKED or rank != "0" or not env.get(ENV_RUN_DIR):
        return
    _MARKED.add(phase)
    try:
        restart = int(env.get(ENV_RESTART, "0") or 0)
        append(RunFiles.from_env(dict(env)).timeline, phase, restart=restart,
               job=env.get("HPCLAUNCH_JOB_ID", ""), t=time.time())
    except (OSError, ValueError):
        pass


def read(run: RunFiles) -> list[dict[str, Any]]:
    """Every readable stamp, in file order; broken lines (a job killed mid-write) are skipped."""
    return [rec for rec in read_json_lines(run.timeline)
            if rec.get("phase") in PHASES and isinstance(rec.get("restart"), int)
            and isinstance(rec.get("t"), (int, float))]


def per_restart(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per restart, oldest first: its job id, each phase's time (the last stamp of a phase wins:
    a job script run again under the same restart number stamps again), the spans between stamped phases in
    seconds (`durations`, keyed by SPANS' names), `queued_s` and `startup_s` (start of the job script, or of the
    launch for a relaunch inside the allocation, to the end of the first step). A requeued restart, which nobody
    submitted, is queued from the previous restart's end."""
    stamps: dict[int, dict[str, float]] = {}
    jobs: dict[int, str] = {}
    for rec in records:
        stamps.setdefault(rec["restart"], {})[rec["phase"]] = float(rec["t"])
        if rec.get("job") and rec["phase"] != "submitted":
            jobs[rec["restart"]] = str(rec["job"])
        elif rec.get("job"):
            jobs.setdefault(rec["restart"], str(rec["job"]))
    out = []
    previous_end: float | None = None
    for restart in sorted(stamps):
        t = stamps[restart]
        durations: dict[str, float] = {}
        before = t.get("submitted", previous_end)
        for phase in PHASES[1:]:
            if phase not in t:
                continue
            if before is not None:
                durations[SPANS[phase]] = round(t[phase] - before, 3)
            before = t[phase]
        start = t.get("started", t.get("launched"))  # a relaunch inside the allocation starts at its launch
        startup = t["first_step"] - start if "first_step" in t and start is not None else None
        out.append({"restart": restart, "job": jobs.get(restart), "phases": {p: t[p] for p in PHASES if p in t},
                    "durations": durations, "queued_s": durations.get("queued"),
                    "startup_s": round(startup, 3) if startup is not None else None})
        previous_end = t.get("finished")
    return out


def load(run: RunFiles) -> list[dict[str, Any]]:
    return per_restart(read(run))


def seconds(s: float) -> str:
    """3m12s, 41s, 0.12s, 2h05m, 1d03h: two units at most."""
    if s < 0:
        return "-" + seconds(-s)
    if s < 10:
        return f"{s:.2g}s" if s < 1 else f"{s:.1f}s"
    n = round(s)
    d, rest = divmod(n, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    if d:
        return f"{d}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def describe(entry: dict[str, Any]) -> str:
    """queued 3m12s, start-up 41s (env 18s, job script 0.05s, launcher 1.2s, rendezvous 2s, model load
    15s, data 3s, first step 2s), training 10m05s"""
    d = entry["durations"]
    parts = []
    if "queued" in d:
        parts.append(f"queued {seconds(d['queued'])}")
    inner = ", ".join(f"{SPANS[p].replace('_', ' ')} {seconds(d[SPANS[p]])}" for p in STARTUP if SPANS[p] in d)
    if entry.get("startup_s") is not None:
        parts.append(f"start-up {seconds(entry['startup_s'])}" + (f" ({inner})" if inner else ""))
    elif inner:
        parts.append(f"start-up (no first step): {inner}")
    if "training" in d:
        parts.append(f"training {seconds(d['training'])}")
    return ", ".join(parts) or "no stamps yet"
