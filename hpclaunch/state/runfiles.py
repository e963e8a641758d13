"""The run-directory contract: every file a job writes into its run directory and hpclaunch reads back,
and the variables through which the job finds it. The one place these names are spelled; every writer
(the job script's templates, rank_exec, the runtime, the msrun node supervisor, the MindSpore recipe)
and every reader (logs, diagnose, status, report) goes through it.

    RUN_DIR/job.sbatch                              the job script (every scheduler)
    RUN_DIR/resolved.yaml                           the resolved job spec (`hpclaunch submit RUN_DIR/resolved.yaml`)
    RUN_DIR/ds_config.json                          DeepSpeed's config (deepspeed launcher)
    RUN_DIR/msrun-node.sh, msrun_worker.py          msrun's node supervisor and worker wrapper (msrun launcher)
    RUN_DIR/container-run.sh                        runs each node's command in the Charliecloud image (charliecloud)
    RUN_DIR/recipe/                                 the copy of the recipe folder the job runs
    RUN_DIR/logs/job.<JOB>.out                      the job script's own output, appended across requeues
    RUN_DIR/logs/rank-<R>.restart-<N>.log           one file per rank and restart (torchrun, deepspeed)
    RUN_DIR/logs/msrun/node<K>.restart-<N>/         per node and restart (msrun): worker_<R>.log, scheduler.log,
                                                    msrun.out, worker_<R>.exit (a failed worker's own exit code)
    RUN_DIR/metrics/rank-<R>.jsonl                  metrics, JSON lines, appended across restarts
    RUN_DIR/progress/node-<K>.restart-<N>.json      node K's record, written by its supervisor alone: host, start,
                                                    end, and ``ranks``: each of its ranks' last step and phase (what
                                                    status, watch, stragglers, the watchdog, blame and goodput read;
                                                    a node without an end while others ended was lost: blame). In a
                                                    multi-node launch node 0's holds the other nodes' records under
                                                    ``nodes`` (sent to it over TCP), and node K>0 writes its own only
                                                    when node 0 does not answer: each node's newest counts
    RUN_DIR/logs/watchdog.restart-<N>.json          the watchdog's verdict when it ended a hung job
    RUN_DIR/progress/rank-<R>.restart-<N>.exit      a rank that exited non-zero: its code and host (rank_exec)
    RUN_DIR/progress/rank-<R>.restart-<N>.json      a rank's own progress record, in run directories written
                                                    before node records (still read back)
    RUN_DIR/progress/last-restart                   the newest restart number the job script used
    RUN_DIR/progress/injected.jsonl                 the injected faults that fired (each fires once across restarts)
    RUN_DIR/recoveries.jsonl                        one line per relaunch inside the allocation (restarts.max):
                                                    cause, rank, node, detected_at, resumed restart
    RUN_DIR/provenance.json                         what the run ran with: versions, recipe commit, packages, modules,
                                                    nodes, devices, assets, environment (submit + the job at start)
    RUN_DIR/health/node-<N>.restart-<R>.json        node N's health checks before step 0 (runtime/node/health.py)
    RUN_DIR/health/restart-<R>.json                 every node's checks merged: ok, failed nodes and checks
    RUN_DIR/stop_reason                             why hpclaunch stopped the job itself (requeues without progress,
                                                    a node that failed its health check)
    RUN_DIR/retries.jsonl                           the jobs that went on from the first, each from the one before:
                                                    resubmissions after a node-level failure (submit --retries),
                                                    resumes (`hpclaunch resume`: "resume": true)
    RUN_DIR/timeline.jsonl                          start-up stamps: submitted, started, env_ready, ... first_step,
                                                    finished; one line per phase and restart (hpclaunch.state.timeline)
    RUN_DIR/tensorboard/                            TensorBoard event files (rank 0's metrics)
    RUN_DIR/wandb/offline-run-<time>-<id>/          W&B's offline runs, one per start (tracking.wandb): run-<id>.wandb,
                                                    and run-<id>.wandb.synced once `hpclaunch sync` uploaded it
    RUN_DIR/checkpoints/                            checkpoints: step-<N>/ complete, .tmp-step-<N>/ being written
    RUN_DIR/checkpoints.jsonl                       one line per checkpoint written: step, why (interval, signal,
                                                    end, final), blocked and write seconds, bytes (rank 0)
    RUN_DIR/progress/stopped.restart-<N>            the ranks saved and stopped on their own before the job's end:
                                                    the job script requeues it or chains a follow-on job
    RUN_DIR/<scheduler>/                            a scheduler's own state, when it keeps any (local: job.json, ...;
                                                    a resumed job's in local/<job id>/)

A sweep (`submit --sweep`, one job array) has a folder of its own holding one run directory per element:

    SWEEP_DIR/sweep.sbatch                          the array's job script: runs element <task>'s job.sbatch
    SWEEP_DIR/sweep.json                            the swept keys and each element's values and run directory
    SWEEP_DIR/element-<I>/                          element I's run directory (all of the above)
    SWEEP_DIR/logs/job.<ARRAY>_<TASK>.out           the array script's own output before it hands over
    SWEEP_DIR/<scheduler>/                          the scheduler's state for the whole array (local: job.json)

Standard library only: the job side imports it before anything else is importable, and the MindSpore
recipe imports it from its own environment.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# --- file and folder names
SCRIPT = "job.sbatch"
RESOLVED = "resolved.yaml"
REQUIRES = "requires.json"  # the packages the job's environment must hold, {name: floor} (config/requirements.py)
DS_CONFIG = "ds_config.json"
MSRUN_NODE_SCRIPT = "msrun-node.sh"
MSRUN_WORKER = "msrun_worker.py"
CONTAINER_RUN = "container-run.sh"  # runs a node's command in the Charliecloud image (templates/containers/)
RECIPE = "recipe"
LOGS = "logs"
METRICS = "metrics"
CHECKPOINTS = "checkpoints"
CHECKPOINT_PREFIX = "step-"  # checkpoints/step-<8-digit step>/
CHECKPOINTS_KEPT = 2  # the newest this many stay; a save writes the next beside them before the oldest goes
MODEL_FILES = "model"  # the model's config.json and tokenizer files, written once by rank 0 (for export)
PROGRESS = "progress"
MSRUN_LOGS = "msrun"
# in a node's msrun log folder: the job was told to stop (USR1, before a requeue): its workers save and stop
MSRUN_STOP = "stop.requested"
SWEEP_SCRIPT = "sweep.sbatch"
SWEEP_INFO = "sweep.json"
ELEMENT_PREFIX = "element-"  # SWEEP_DIR/element-<I>/
TIMELINE = "timeline.jsonl"
TENSORBOARD = "tensorboard"
WANDB = "wandb"  # W&B's own folder name under the dir given to wandb.init
PROVENANCE = "provenance.json"
HEALTH = "health"  # health/node-<N>.restart-<R>.json, health/restart-<R>.json (hpclaunch/runtime/node/health.py)
USAGE = "usage"  # usage/node-<N>.restart-<R>.jsonl: each node's samples (hpclaunch/runtime/node/sampler.py)
_CHECKPOINT = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")

# --- the variables the job script exports for everything that runs inside the job
ENV_RUN_DIR = "HPCLAUNCH_RUN_DIR"
ENV_CONFIG = "HPCLAUNCH_CONFIG"  # RUN_DIR/resolved.yaml
ENV_LOG_DIR = "HPCLAUNCH_LOG_DIR"  # RUN_DIR/logs
ENV_RESTART = "HPCLAUNCH_RESTART"  # 0 on the first start, +1 per requeue
ENV_MSRUN_STATUS_DIR = "HPCLAUNCH_MSRUN_STATUS_DIR"  # this node's msrun log folder (set by msrun-node.sh)
ENV_END_TIME = "HPCLAUNCH_END_TIME"  # the job's end (epoch seconds) as the scheduler says it; unset: unknown
# the node-local folder (memory) where a node's ranks leave their progress records for its supervisor, the one
# process of the node that writes them into the run directory (hpclaunch/runtime/node/noderecord.py); set by the
# supervisor for the processes it starts, unset elsewhere
ENV_NODE_STATE = "HPCLAUNCH_NODE_STATE"

def read_json_lines(path: Path) -> list[dict]:
    """The JSON objects of a JSON-lines file the job appends to, in file order: a missing or unreadable file is
    empty, and a broken line (a job killed mid-write) or one that is no object is skipped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def append_once(path: Path, data: bytes) -> None:
    """Append `data` to `path` in one write (O_APPEND): lines from several processes never mix, and a shared
    filesystem sees open, write, close (Python's open() would add a stat)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


_JOB_OUTPUT = re.compile(r"^job\.(.+)\.out$")
_RANK_LOG = re.compile(r"^rank-(\d+)\.restart-(\d+)\.log$")
_PROGRESS = re.compile(r"^rank-(\d+)\.restart-(\d+)\.json$")
_NODE_RECORD = re.compile(r"^node-([^.]+)\.restart-(\d+)\.json$")
_MSRUN_NODE = re.compile(r"^node(\d+)\.restart-(\d+)$")
_MSRUN_WORKER = re.compile(r"^worker_(\d+)\.log$")
_HEALTH_SUMMARY = re.compile(r"^restart-(\d+)\.json$")
_RESTART_IN_NAME = re.compile(r"\.restart-(\d+)(?:\.|$)")


def job_output_name(job_id: str) -> str:
    """``job.<JOB>.out``; a scheduler that names the file itself passes its own placeholder (Slurm: ``%j``)."""
    return f"job.{job_id}.out"


def job_output_id(name: str) -> str | None:
    """The job id in a ``job.<JOB>.out`` file name, else None."""
    m = _JOB_OUTPUT.match(name)
    return m.group(1) if m else None


def rank_log_name(rank: int, restart: int) -> str:
    return f"rank-{rank}.restart-{restart}.log"


def msrun_node_name(node: int | str, restart: int | str) -> str:
    """``node<K>.restart-<N>``; the job script passes shell references (``${HPCLAUNCH_NODE_RANK}``)."""
    return f"node{node}.restart-{restart}"


def stopped_name(restart: int | str) -> str:
    """``stopped.restart-<N>`` (in progress/): the job script passes a shell reference for the restart."""
    return f"stopped.restart-{restart}"


def watchdog_verdict_name(restart: int | str) -> str:
    return f"watchdog.restart-{restart}.json"


def slow_verdict_name(restart: int | str) -> str:
    return f"slow.restart-{restart}.json"


def msrun_exit_name(rank: int | str) -> str:
    return f"worker_{rank}.exit"


@dataclass(frozen=True, order=True)
class LogFile:
    """One rank's log of one restart."""

    restart: int
    rank: int
    path: Path
    kind: str = "rank"  # rank (torchrun, deepspeed) | msrun (an msrun worker)

    @property
    def label(self) -> str:
        return f"rank{self.rank}"


def progress_record(path: Path) -> dict[str, object] | None:
    """One rank's progress record file (its writer pads it with spaces or NULs), or None when it is missing, being
    written for the first time, not JSON or has no rank."""
    try:
        record = json.loads(path.read_bytes().rstrip(b" \x00") or b"{}")
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("rank"), int) else None


def read_node_record(path: Path) -> dict[str, object] | None:
    """A node record's JSON (written whole and renamed into place), or None when it is missing or not an object.
    Read in two calls on the shared filesystem, open and read (node 0's supervisor reads every node's record once
    per publishing interval; Python's read_text adds two stats and a read)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            data = chunk = os.read(fd, 1 << 20)
            while len(chunk) == 1 << 20:  # a short read is the end of a regular file
                chunk = os.read(fd, 1 << 20)
                data += chunk
        finally:
            os.close(fd)
        record = json.loads(data)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def newest_per_node(records: Iterable[dict[str, object]]) -> dict[str, dict[str, object]]:
    """Each node's newest record ("at") among `records`: node 0's record of a multi-node launch holds the records
    the other nodes sent it (``"nodes"``: node -> record; hpclaunch/runtime/node/recordlink.py), each counted as
    that node's, and a node that could not reach node 0 wrote its own file."""
    out: dict[str, dict[str, object]] = {}
    for record in records:
        held = record.get("nodes")
        own = {k: v for k, v in record.items() if k != "nodes"}
        for one in [own, *(held.values() if isinstance(held, dict) else ())]:
            if not isinstance(one, dict):
                continue
            node = str(one.get("node", f"?{len(out)}"))
            if node not in out or _at(one) >= _at(out[node]):
                out[node] = one
    return out


def _at(record: dict[str, object]) -> float:
    at = record.get("at")
    return float(at) if isinstance(at, (int, float)) else 0.0


def ranks_of(records: Iterable[dict[str, object]]) -> dict[int, dict[str, object]]:
    """The ranks' progress records inside node records (one per node): rank -> {rank, step, phase, t, host, ...}."""
    out: dict[int, dict[str, object]] = {}
    for record in records:
        out.update(node_ranks(record))
    return out


def node_ranks(record: dict[str, object]) -> dict[int, dict[str, object]]:
    """The ranks' progress records inside a node record: rank -> {rank, step, phase, t, host, ...}."""
    ranks = record.get("ranks")
    if not isinstance(ranks, dict):
        return {}
    return {rec["rank"]: rec for rec in ranks.values() if isinstance(rec, dict) and isinstance(rec.get("rank"), int)}


@dataclass(frozen=True)
class RunFiles:
    """The paths of one run directory."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> RunFiles:
        """Inside a job: the run directory the job script exported (the current folder otherwise)."""
        env = os.environ if environ is None else environ
        return cls(Path(env.get(ENV_RUN_DIR) or "."))

    # --- what hpclaunch writes before the job starts
    @property
    def script(self) -> Path:
        return self.root / SCRIPT

    @property
    def resolved(self) -> Path:
        return self.root / RESOLVED

    @property
    def requires(self) -> Path:
        return self.root / REQUIRES

    @property
    def container_run(self) -> Path:
        return self.root / CONTAINER_RUN

    @property
    def ds_config(self) -> Path:
        return self.root / DS_CONFIG

    @property
    def recipe(self) -> Path:
        return self.root / RECIPE

    @property
    def msrun_node_script(self) -> Path:
        return self.root / MSRUN_NODE_SCRIPT

    @property
    def msrun_worker(self) -> Path:
        return self.root / MSRUN_WORKER

    # --- what the job writes
    @property
    def logs(self) -> Path:
        return self.root / LOGS

    @property
    def metrics(self) -> Path:
        return self.root / METRICS

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    @property
    def model_files(self) -> Path:
        return self.root / MODEL_FILES

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        """The newest complete checkpoint (step, folder): what a restarted job resumes from; None if none."""
        root = self.checkpoints
        if not root.is_dir():
            return None
        steps = [(int(m.group(1)), p) for p in root.glob(f"{CHECKPOINT_PREFIX}*")
                 if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
        return max(steps, key=lambda sp: sp[0], default=None)

    @property
    def checkpoint_log(self) -> Path:
        return self.root / "checkpoints.jsonl"

    def stopped(self, restart: int) -> Path:
        return self.progress / stopped_name(restart)

    def scheduler_state(self, scheduler: str) -> Path:
        return self.root / scheduler

    def next_restart(self) -> int:
        """The restart number after every one this run directory has seen (rank logs, msrun node folders,
        progress, usage samples, watchdog verdicts, the timeline): a job queued again into it (`hpclaunch
        resume`) starts there, so its logs stay apart from those before it."""
        seen = [int(rec["restart"]) for rec in read_json_lines(self.timeline) if isinstance(rec.get("restart"), int)]
        for folder in (self.logs, self.logs / MSRUN_LOGS, self.progress, self.usage):
            if folder.is_dir():
                seen += [int(m.group(1)) for p in folder.iterdir() if (m := _RESTART_IN_NAME.search(p.name))]
        return max(seen, default=-1) + 1

    def job_output(self, job_id: str) -> Path:
        return self.logs / job_output_name(job_id)

    def rank_log(self, rank: int, restart: int) -> Path:
        return self.logs / rank_log_name(rank, restart)

    def msrun_node_dir(self, node: int, restart: int) -> Path:
        return self.logs / MSRUN_LOGS / msrun_node_name(node, restart)

    def metrics_file(self, rank: int) -> Path:
        return self.metrics / f"rank-{rank}.jsonl"

    @property
    def progress(self) -> Path:
        return self.root / PROGRESS

    def progress_file(self, rank: int, restart: int) -> Path:
        """A rank's own progress record, as jobs wrote them before node records (read back, never written now)."""
        return self.progress / f"rank-{rank}.restart-{restart}.json"

    def progress_records(self, restart: int) -> dict[int, dict[str, object]]:
        """Every rank's last published record of one restart: rank -> {step, phase, t, host, win, sf, ...}, from
        the node records (and from rank files, in a run directory written before them). One file per node."""
        out: dict[int, dict[str, object]] = {}
        listing = [p for p, r in self._progress_listing(_PROGRESS, _NODE_RECORD) if r == restart]  # one listing
        for path in sorted(p for p in listing if _PROGRESS.match(p.name)):
            if (record := progress_record(path)) is not None and isinstance(rank := record["rank"], int):
                out[rank] = record
        out.update(ranks_of(self._node_record_data(p for p in listing if _NODE_RECORD.match(p.name))))
        return out

    def node_record_data(self, restart: int) -> list[dict[str, object]]:
        """Every node's last record of one restart ({node, host, started, at, ranks, signalled, ended, code}): those
        node 0 holds in its file and those of nodes that wrote their own, each node's newest."""
        return self._node_record_data(self.node_records(restart))

    @staticmethod
    def _node_record_data(paths: Iterable[Path]) -> list[dict[str, object]]:
        found = (read_node_record(path) for path in sorted(paths))
        return list(newest_per_node(r for r in found if r is not None).values())

    def progress_record(self, rank: int, restart: int) -> dict[str, object] | None:
        """One rank's last published record of one restart (None when no node record holds it)."""
        return self.progress_records(restart).get(rank)

    def progress_restarts(self) -> list[int]:
        """The restarts that have progress records (node records, or the rank files of older jobs), oldest first."""
        return sorted({restart for _, restart in self._progress_listing(_PROGRESS, _NODE_RECORD)})

    def _progress_listing(self, *patterns: re.Pattern[str]) -> list[tuple[Path, int]]:
        """(path, restart) of the files in progress/ whose names match one of `patterns` (restart: group 2)."""
        try:
            names = os.listdir(self.progress)
        except OSError:  # no progress/ yet
            return []
        return [(self.progress / name, int(m.group(2))) for name in names
                for m in [next(filter(None, (pat.match(name) for pat in patterns)), None)] if m]

    def _progress_names(self, restart: int, pattern: re.Pattern[str]) -> list[Path]:
        return sorted(p for p, r in self._progress_listing(pattern) if r == restart)

    def watchdog_verdict(self, restart: int) -> Path:
        return self.logs / watchdog_verdict_name(restart)

    def slow_verdict(self, restart: int) -> Path:
        """A node found slow in this restart (hpclaunch/runtime/node/slowswap.py): swapped, or only reported."""
        return self.logs / slow_verdict_name(restart)

    def slow_verdicts(self) -> list[Path]:
        """Every restart's slow-node finding, oldest restart first."""
        found = [(int(m.group(1)), p) for p in (self.logs.glob("slow.restart-*.json") if self.logs.is_dir() else [])
                 if (m := re.match(r"^slow\.restart-(\d+)\.json$", p.name))]
        return [p for _, p in sorted(found)]

    def rank_exit(self, rank: int, restart: int) -> Path:
        return self.progress / f"rank-{rank}.restart-{restart}.exit"

    def rank_exits(self, restart: int) -> list[Path]:
        return sorted(self.progress.glob(f"rank-*.restart-{restart}.exit")) if self.progress.is_dir() else []

    def node_record(self, node: int | str, restart: int) -> Path:
        return self.progress / f"node-{node}.restart-{restart}.json"

    def node_records(self, restart: int) -> list[Path]:
        return self._progress_names(restart, _NODE_RECORD)

    @property
    def last_restart(self) -> Path:
        """The newest restart number the job script used (a relaunch inside the allocation takes the next): a
        requeue numbers its start after it, so logs stay apart."""
        return self.progress / "last-restart"

    @property
    def injected(self) -> Path:
        return self.progress / "injected.jsonl"

    @property
    def recoveries(self) -> Path:
        return self.root / "recoveries.jsonl"

    @property
    def promise(self) -> Path:
        """The goodput submit promised (hpclaunch/plan/promise.py), beside which `report` sets the outcome."""
        return self.root / "promise.json"

    @property
    def provenance(self) -> Path:
        return self.root / PROVENANCE

    @property
    def stop_reason(self) -> Path:
        return self.root / "stop_reason"

    @property
    def retries(self) -> Path:
        return self.root / "retries.jsonl"

    @property
    def timeline(self) -> Path:
        return self.root / TIMELINE

    @property
    def tensorboard(self) -> Path:
        return self.root / TENSORBOARD

    @property
    def wandb(self) -> Path:
        return self.root / WANDB

    def wandb_offline_runs(self) -> list[Path]:
        """W&B's offline run folders (each holding a run-<id>.wandb), oldest first (their names start with the
        time)."""
        return self._wandb_runs("offline-run-*")

    def wandb_online_runs(self) -> list[Path]:
        """The run folders of W&B runs streamed from the job (tracking.wandb.mode online)."""
        return self._wandb_runs("run-*")

    def _wandb_runs(self, pattern: str) -> list[Path]:
        if not self.wandb.is_dir():
            return []
        return sorted(p for p in self.wandb.glob(pattern) if p.is_dir() and any(p.glob("run-*.wandb")))

    @property
    def usage(self) -> Path:
        return self.root / USAGE

    def usage_samples(self, node: int | str, restart: int | str) -> Path:
        return self.usage / f"node-{node}.restart-{restart}.jsonl"

    def health_node(self, node: int | str, restart: int | str) -> Path:
        return self.root / HEALTH / f"node-{node}.restart-{restart}.json"

    def health_summary(self, restart: int | str) -> Path:
        return self.root / HEALTH / f"restart-{restart}.json"

    def health_launch_nodes(self, restart: int | str) -> Path:
        """The launch's nodes after spares took the place of nodes that failed the health check (line 1) and the
        nodes dropped (line 2); absent when no node was replaced. The job script reads it (health.sh.j2)."""
        return self.root / HEALTH / f"launch-nodes.restart-{restart}"

    def health_summaries(self) -> list[Path]:
        """Every restart's merged health verdict, oldest restart first."""
        found = [(int(m.group(1)), p) for p in (self.root / HEALTH).glob("restart-*.json")
                 if (m := _HEALTH_SUMMARY.match(p.name))]
        return [p for _, p in sorted(found)]

    # --- reading back
    def job_outputs(self) -> list[Path]:
        """The job script's output files (one per job id the run had), oldest first."""
        if not self.logs.is_dir():
            return []
        found = [p for p in self.logs.iterdir() if _JOB_OUTPUT.match(p.name)]
        return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))

    def rank_logs(self, *, rank: int | None = None, restart: int | None = None) -> list[LogFile]:
        """Every per-rank log (torchrun/deepspeed ranks and msrun workers), ordered by restart then rank."""
        found: list[LogFile] = []
        if self.logs.is_dir():
            for p in self.logs.iterdir():
                m = _RANK_LOG.match(p.name)
                if m:
                    found.append(LogFile(int(m.group(2)), int(m.group(1)), p))
            msrun = self.logs / MSRUN_LOGS
            if msrun.is_dir():
                for d in msrun.iterdir():
                    dm = _MSRUN_NODE.match(d.name)
                    if not dm or not d.is_dir():
                        continue
                    for p in d.iterdir():
                        wm = _MSRUN_WORKER.match(p.name)
                        if wm:
                            found.append(LogFile(int(dm.group(2)), int(wm.group(1)), p, "msrun"))
        if rank is not None:
            found = [f for f in found if f.rank == rank]
        if restart is not None:
            found = [f for f in found if f.restart == restart]
        return sorted(found)


@dataclass(frozen=True)
class SweepFiles:
    """The paths of one sweep folder (`submit --sweep`); each element's run directory is a RunFiles."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def script(self) -> Path:
        return self.root / SWEEP_SCRIPT

    @property
    def info(self) -> Path:
        return self.root / SWEEP_INFO

    @property
    def logs(self) -> Path:
        return self.root / LOGS

    def element(self, index: int) -> Path:
        return self.root / f"{ELEMENT_PREFIX}{index}"

    def scheduler_state(self, scheduler: str) -> Path:
        return self.root / scheduler

    def job_output(self, job_id: str) -> Path:
        return self.logs / job_output_name(job_id)


def restarts(files: list[LogFile]) -> list[int]:
    return sorted({f.restart for f in files})
