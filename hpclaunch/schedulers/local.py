"""Local: the job script runs on this machine in the background, as its own process group; its template
parts (templates/schedulers/local/) make it a one-node job. The job id is passed as HPCLAUNCH_JOB_ID.
Its state lives in RUN_DIR/local/ (the run-directory contract's scheduler state folder); a job queued again
into the same run directory (`hpclaunch resume`: `resubmit`) keeps its own in RUN_DIR/local/<job id>/.

A sweep (job array) is run by a supervisor in the background (`python -m hpclaunch.schedulers.local`,
state in SWEEP_DIR/local/) that starts the array script for element 0, 1, ... as jobs of their own
(``local-<n>_<i>``, state in the element's RUN_DIR/local/), at most K at a time, in order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.core import paths
from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.schedulers.base import JobStatus, Scheduler, clock
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles, SweepFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.config.profile import Profile

# Runs the command after $1 and writes its exit code into $1 atomically when it ends, however it ends
# short of SIGKILL.
_WRAPPER = 'code="$1"; shift; "$@"; rc=$?; echo "$rc" > "$code.tmp"; mv "$code.tmp" "$code"; exit "$rc"'


def _state_dir(run_dir: Path, job_id: str | None = None) -> Path:
    """RUN_DIR/local/, the state of the run directory's first job; a later job's (`hpclaunch resume`, which
    queues the same script again) is RUN_DIR/local/<job id>/."""
    base = RunFiles(run_dir).scheduler_state(LocalScheduler.name)
    return base / job_id if job_id is not None and (base / job_id).is_dir() else base


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # the group may hold only zombies; ask ps whether any member is still running
    out = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return any(s and not s.startswith("Z") for s in out.split())


def _start(argv: list[str], run_dir: Path, job_id: str, env: dict[str, str] | None = None,
           state: Path | None = None) -> subprocess.Popen:
    """Run `argv` in the background as its own process group, its output appended to the run directory's
    job output, its state (job.json, exitcode) in `state` (default RUN_DIR/local/). HPCLAUNCH_RESTART is 0
    unless `env` says otherwise."""
    state = state or _state_dir(run_dir)
    state.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "HPCLAUNCH_RESTART": "0", **(env or {}), "HPCLAUNCH_JOB_ID": job_id}
    with open(RunFiles(run_dir).job_output(job_id), "ab") as out:
        proc = subprocess.Popen(["sh", "-c", _WRAPPER, "hpclaunch-local", str(state / "exitcode"), *argv],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=full_env, cwd=run_dir, start_new_session=True)
    (state / "job.json").write_text(json.dumps({"job_id": job_id, "pgid": proc.pid, "started": time.time()}))
    return proc


def _mark_cancelled(run_dir: Path) -> None:
    state = _state_dir(run_dir)
    state.mkdir(exist_ok=True)
    (state / "cancelled").touch()


def run_array(sweep_dir: Path, job_id: str, count: int, max_parallel: int) -> int:
    """The sweep supervisor: element i runs the array script with HPCLAUNCH_ARRAY_TASK=i as job
    ``<job_id>_<i>``, at most `max_parallel` at a time, in order. SIGTERM (cancel): start no more, stop the
    running ones. Exit 0 when every element completed, 1 otherwise."""
    files = SweepFiles(sweep_dir)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    waiting = list(range(count))
    running: dict[int, subprocess.Popen] = {}
    failed = False
    while (waiting or running) and not stopping:
        for index, proc in list(running.items()):
            if proc.poll() is not None:
                failed |= proc.returncode != 0
                del running[index]
        while waiting and len(running) < max_parallel and not stopping:
            index = waiting.pop(0)
            if (_state_dir(files.element(index)) / "cancelled").exists():
                failed = True
                continue
            running[index] = _start(["bash", str(files.script)], files.element(index), f"{job_id}_{index}",
                                    {"HPCLAUNCH_ARRAY_TASK": str(index)})
        time.sleep(0.2)
    if not stopping:
        return 1 if failed else 0
    for index in [*waiting, *running]:
        _mark_cancelled(files.element(index))
    for proc in running.values():
        _stop_group(proc.pid)
    return 128 + signal.SIGTERM


def _stop_group(pgid: int, grace: float = 15) -> None:
    """SIGTERM to the process group, SIGKILL after `grace` seconds if it still runs."""
    if not _alive(pgid):
        return
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + grace
    while time.time() < deadline and _alive(pgid):
        time.sleep(0.2)
    if _alive(pgid):
        os.killpg(pgid, signal.SIGKILL)


class LocalScheduler(Scheduler):
    name = "local"

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        if spec.notify.mail is not None:
            raise ConfigError(f"mail on {','.join(spec.notify.mail.type)}: the local scheduler (profile "
                              f"{spec.profile.name!r}) sends no mail", key="notify.mail",
                              hint="leave notify.mail out; notify.webhook or notify.command send word from the job "
                                   "itself, on any scheduler")
        return {}

    def submit(self, script: Path, run_dir: Path, after: Sequence[str] = ()) -> str:
        self.dependency_options(after)  # refused: a local job starts at once
        job_id = registry.next_local_id()
        _start(["bash", str(script)], run_dir, job_id)
        return job_id

    def resubmit(self, script: Path, run_dir: Path, *, restart: int, exclude: Sequence[str] = ()) -> str:
        if exclude:
            raise ConfigError(f"--exclude {','.join(exclude)}: the local scheduler runs the job on this machine: "
                              "there are no nodes to exclude", hint="leave out --exclude")
        job_id = registry.next_local_id()
        _start(["bash", str(script)], run_dir, job_id, {"HPCLAUNCH_RESTART": str(restart)},
               state=RunFiles(run_dir).scheduler_state(self.name) / job_id)
        return job_id

    def submit_array(self, script: Path, sweep_dir: Path, count: int, max_parallel: int | None,
                     after: Sequence[str] = ()) -> str:
        self.dependency_options(after)
        job_id = registry.next_local_id()
        # the supervisor imports this very hpclaunch, installed or not
        root = str(paths.import_root())
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        _start([sys.executable, "-m", __name__, str(sweep_dir), job_id, str(count), str(max_parallel or count)],
               sweep_dir, job_id, {"PYTHONPATH": path})
        return job_id

    def run_probe(self, script: Path, output: Path, profile: Profile, *, timeout: float) -> int:
        """This machine is the node: the script runs here, in the foreground."""
        with open(output, "wb") as out:
            try:
                return subprocess.run(["bash", str(script)], stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, timeout=timeout, cwd=output.parent).returncode
            except subprocess.TimeoutExpired:
                return 124

    def _one(self, job_id: str) -> JobStatus:
        try:
            record = registry.get(job_id)
        except HpclaunchError:
            return JobStatus(job_id, "UNKNOWN", source="local")
        run_dir = Path(record.run_dir)
        state = _state_dir(run_dir, job_id)
        try:
            info = json.loads((state / "job.json").read_text())
            started, pgid = float(info["started"]), int(info["pgid"])
        except (OSError, ValueError, TypeError, KeyError):
            return self._not_started(job_id, record, state)
        if (state / "cancelled").exists():
            return JobStatus(job_id, "CANCELLED", exit_code=None, nodes="localhost", source="local",
                             elapsed=_took(started, state / "cancelled"), ended=_mtime(state / "cancelled"))
        ended = _exit_code(state)
        if ended is None and _alive(pgid):
            return JobStatus(job_id, "RUNNING", nodes="localhost", elapsed=clock(time.time() - started),
                             source="local")
        if ended is None:
            # the wrapper writes the exit code, then its group ends: read it again now that the group is
            # known to be gone, or a job that ended between the two looks as if it vanished
            ended = _exit_code(state)
        if ended is None:
            return JobStatus(job_id, "FAILED", reason="the job's process group vanished", nodes="localhost",
                             source="local")
        return JobStatus(job_id, "COMPLETED" if ended == 0 else "FAILED", exit_code=f"{ended}:0",
                         nodes="localhost", elapsed=_took(started, state / "exitcode"),
                         ended=_mtime(state / "exitcode"), source="local")

    def _not_started(self, job_id: str, record: registry.JobRecord, state: Path) -> JobStatus:
        """A sweep's element that its supervisor has not started (yet): PENDING while the sweep runs."""
        sweep = (record.sweep or {}).get("id")
        if (state / "cancelled").exists():
            return JobStatus(job_id, "CANCELLED", source="local", ended=_mtime(state / "cancelled"))
        if not sweep or sweep == job_id:
            return JobStatus(job_id, "UNKNOWN", source="local")
        if not self._one(sweep).finished:
            return JobStatus(job_id, "PENDING", reason="JobArrayTaskLimit", source="local",
                             reason_text="the array's limit of tasks running at once (--max-parallel) is reached "
                                         "(the next task starts when one ends)")
        return JobStatus(job_id, "CANCELLED", reason="the sweep ended before it started", source="local")

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        return {j: self._one(j) for j in job_ids}

    def cancel(self, job_id: str) -> None:
        record = registry.get(job_id)
        run_dir = Path(record.run_dir)
        state = _state_dir(run_dir, job_id)
        try:
            pgid = int(json.loads((state / "job.json").read_text())["pgid"])
        except (OSError, ValueError, TypeError, KeyError):
            if not run_dir.is_dir():
                raise HpclaunchError(
                    f"cannot cancel local job {job_id}: its run directory {run_dir} is gone, and with it the "
                    "record of the job's process group",
                    hint=f"if it still runs, find it with `ps -eo pgid,args | grep {run_dir.name}` and stop "
                         "it with `kill -- -PGID`") from None
            if (record.sweep or {}).get("id") not in (None, job_id):
                _mark_cancelled(run_dir)  # a sweep's element not started yet: it never will be
                return
            raise HpclaunchError(f"cannot cancel local job {job_id}: {state / 'job.json'} is "
                                 "missing or unreadable, so its process group is unknown") from None
        if not _alive(pgid):
            return
        (state / "cancelled").touch()
        _stop_group(pgid)

    def estimated_start(self, partition: str, nodes: int, gres: str | None, per_node: int,
                        time_limit: str | None) -> str | None:
        return "now"  # no queue: a local job starts when it is submitted

    def find_job(self, run_dir: Path) -> str | None:
        """The newest job started from `run_dir` (a resumed one's state is RUN_DIR/local/<job id>/)."""
        base = _state_dir(run_dir)
        started = []
        for path in (base / "job.json", *base.glob("*/job.json")):
            try:
                info = json.loads(path.read_text())
                started.append((float(info["started"]), str(info["job_id"])))
            except (OSError, ValueError, TypeError, KeyError):
                continue
        return max(started)[1] if started else None


def _mtime(path: Path) -> str | None:
    """When `path` was last written, local time (2026-11-23T06:44:07): when the job ended."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(path.stat().st_mtime))
    except OSError:
        return None


def _took(started: float, end_marker: Path) -> str | None:
    """How long a job that ended ran: from its start to when `end_marker` was written."""
    try:
        return clock(max(0.0, end_marker.stat().st_mtime - started))
    except OSError:
        return None


def _exit_code(state: Path) -> int | None:
    """The job script's exit code, once the wrapper has written it (atomically: rename)."""
    try:
        text = (state / "exitcode").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.lstrip("-").isdigit() else 1


if __name__ == "__main__":
    sys.exit(run_array(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
