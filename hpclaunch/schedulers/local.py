"""Local: the job script runs on this machine in the background, as its own process group; its template
parts (templates/schedulers/local/) make it a one-node job. The job id is passed as HPCLAUNCH_JOB_ID.
Its state lives in RUN_DIR/local/ (the run-directory contract's scheduler state folder)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from hpclaunch import registry
from hpclaunch.errors import HpclaunchError
from hpclaunch.runfiles import RunFiles
from hpclaunch.schedulers.base import JobStatus, Scheduler

# Writes the script's exit code atomically when it ends, however it ends short of SIGKILL.
_WRAPPER = 'bash "$1"; rc=$?; echo "$rc" > "$2.tmp"; mv "$2.tmp" "$2"; exit "$rc"'


def _state_dir(run_dir: Path) -> Path:
    return RunFiles(run_dir).scheduler_state(LocalScheduler.name)


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


class LocalScheduler(Scheduler):
    name = "local"

    def submit(self, script: Path, run_dir: Path) -> str:
        job_id = registry.next_local_id()
        state = _state_dir(run_dir)
        state.mkdir(exist_ok=True)
        env = {**os.environ, "HPCLAUNCH_JOB_ID": job_id}
        out = open(RunFiles(run_dir).job_output(job_id), "ab")
        proc = subprocess.Popen(["sh", "-c", _WRAPPER, "hpclaunch-local", str(script), str(state / "exitcode")],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=run_dir, start_new_session=True)
        out.close()
        (state / "job.json").write_text(json.dumps({"job_id": job_id, "pgid": proc.pid,
                                                    "started": time.time()}))
        return job_id

    def _one(self, job_id: str) -> JobStatus:
        try:
            run_dir = Path(registry.get(job_id).run_dir)
            info = json.loads((_state_dir(run_dir) / "job.json").read_text())
            started, pgid = float(info["started"]), int(info["pgid"])
        except (HpclaunchError, OSError, ValueError, TypeError, KeyError):
            return JobStatus(job_id, "UNKNOWN", source="local")
        state = _state_dir(run_dir)
        if (state / "cancelled").exists():
            return JobStatus(job_id, "CANCELLED", exit_code=None, nodes="localhost", source="local")
        ended = _exit_code(state)
        if ended is None and _alive(pgid):
            return JobStatus(job_id, "RUNNING", nodes="localhost", elapsed=f"{int(time.time() - started)}s",
                             source="local")
        if ended is None:
            # the wrapper writes the exit code, then its group ends: read it again now that the group is
            # known to be gone, or a job that ended between the two looks as if it vanished
            ended = _exit_code(state)
        if ended is None:
            return JobStatus(job_id, "FAILED", reason="the job's process group vanished", nodes="localhost",
                             source="local")
        return JobStatus(job_id, "COMPLETED" if ended == 0 else "FAILED", exit_code=f"{ended}:0",
                         nodes="localhost", source="local")

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        return {j: self._one(j) for j in job_ids}

    def cancel(self, job_id: str) -> None:
        run_dir = Path(registry.get(job_id).run_dir)
        try:
            pgid = int(json.loads((_state_dir(run_dir) / "job.json").read_text())["pgid"])
        except (OSError, ValueError, TypeError, KeyError):
            if not run_dir.is_dir():
                raise HpclaunchError(
                    f"cannot cancel local job {job_id}: its run directory {run_dir} is gone, and with it the "
                    "record of the job's process group",
                    hint=f"if it still runs, find it with `ps -eo pgid,args | grep {run_dir.name}` and stop "
                         "it with `kill -- -PGID`") from None
            raise HpclaunchError(f"cannot cancel local job {job_id}: {_state_dir(run_dir) / 'job.json'} is "
                                 "missing or unreadable, so its process group is unknown") from None
        if not _alive(pgid):
            return
        (_state_dir(run_dir) / "cancelled").touch()
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.time() + 15
        while time.time() < deadline and _alive(pgid):
            time.sleep(0.2)
        if _alive(pgid):
            os.killpg(pgid, signal.SIGKILL)

    def find_job(self, run_dir: Path) -> str | None:
        try:
            return str(json.loads((_state_dir(run_dir) / "job.json").read_text())["job_id"])
        except (OSError, ValueError, TypeError, KeyError):
            return None


def _exit_code(state: Path) -> int | None:
    """The job script's exit code, once the wrapper has written it (atomically: rename)."""
    try:
        text = (state / "exitcode").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.lstrip("-").isdigit() else 1
