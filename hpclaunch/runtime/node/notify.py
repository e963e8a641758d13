"""Word when a job ends: ``python -m hpclaunch.runtime.node.notify --exit-code RC [--since T] [--stopped]``.

The job script runs it from its EXIT trap (templates/blocks/notify.sh.j2), with the job's `notify:` settings as JSON
in HPCLAUNCH_NOTIFY (webhook, command, when, recipe, profile, run_dir; hpclaunch/submission/render.py writes them).
It POSTs the job's end as JSON to the webhook and runs the command with the same JSON on stdin and
HPCLAUNCH_NOTIFY_JOB_ID, _STATE, _EXIT_CODE, _CAUSE, _RUN_DIR, _RECIPE, _PROFILE, _ENDED_AT set, each within TIMEOUT
seconds. A receiver that is down, slow or answers an error costs one line on stderr, never the job's exit status.
The JSON:

    job_id     HPCLAUNCH_JOB_ID
    state      COMPLETED (exit status 0) or FAILED; after a stop signal (--stopped: cancel, preemption, the time
               limit) TIMEOUT when the job's end (HPCLAUNCH_END_TIME) is near, else CANCELLED. As the job sees
               itself: the scheduler's accounting may say more (PREEMPTED, NODE_FAIL, OUT_OF_MEMORY).
    exit_code  the job script's exit status
    cause      hpclaunch's own reason for stopping, written during this job (RUN_DIR/stop_reason: a node's health
               check, requeues without progress, a stop before the time limit); else, for a failure, the first
               error line the diagnosis finds in the logs (hpclaunch.logs.diagnose); else what stopped it; or null
    run_dir, recipe, profile
    ended_at   when it ended, ISO 8601 in UTC

`when` chooses the ends that send word: ended (every one), completed, failed (every end but COMPLETED). Standard
library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hpclaunch.core.version import __version__
from hpclaunch.state.runfiles import ENV_END_TIME, RunFiles

SETTINGS_ENV = "HPCLAUNCH_NOTIFY"
TIMEOUT = 5.0  # seconds each of the webhook and the command may take: both fit in Slurm's KillWait (30 s)
NEAR_END = 60.0  # a stop signal this close to the job's end (or after it) is the time limit's


def state_of(exit_code: int, stopped: bool, end_time: float | None, now: float) -> str:
    if stopped:
        return "TIMEOUT" if end_time is not None and now >= end_time - NEAR_END else "CANCELLED"
    return "COMPLETED" if exit_code == 0 else "FAILED"


def cause_of(run: RunFiles, state: str, job_id: str, since: float) -> str | None:
    """hpclaunch's reason for stopping, when written during this job; else, for a failure, the diagnosis's first
    error line; else what stopped the job."""
    try:
        if run.stop_reason.stat().st_mtime >= since:
            return run.stop_reason.read_text(errors="replace").strip().splitlines()[0] or None
    except (OSError, IndexError):
        pass
    if state == "TIMEOUT":
        return "stopped at the time limit"
    if state == "CANCELLED":
        return "stopped by a signal (cancelled, or preempted)"
    if state != "FAILED":
        return None
    try:
        from hpclaunch.logs.diagnose import diagnose

        found = diagnose(run.root, job_id)
    except Exception as exc:  # noqa: BLE001 (the cause is evidence at best: the word goes without it)
        print(f"hpclaunch: notify: no cause: the diagnosis failed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    return found.error or (found.title if found.cause else None)


def payload(settings: dict[str, Any], exit_code: int, *, stopped: bool, since: float,
            environ: Mapping[str, str]) -> dict[str, Any]:
    now = time.time()
    try:
        end_time: float | None = float(environ.get(ENV_END_TIME) or "")
    except ValueError:
        end_time = None
    state = state_of(exit_code, stopped, end_time, now)
    job_id = environ.get("HPCLAUNCH_JOB_ID", "")
    return {"job_id": job_id, "state": state, "exit_code": exit_code,
            "cause": cause_of(RunFiles(Path(settings["run_dir"])), state, job_id, since),
            "run_dir": settings["run_dir"], "recipe": settings.get("recipe"), "profile": settings.get("profile"),
            "ended_at": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds")}


def wanted(when: list[str], state: str) -> bool:
    return "ended" in when or ("completed" if state == "COMPLETED" else "failed") in when


def where(url: str) -> str:
    """The receiver without its path, query or user (a webhook's path often holds its token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def post(url: str, body: bytes) -> str:
    """POST `body` to `url`; what came of it, in words. Raises RuntimeError when it did not arrive."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": f"hpclaunch/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:  # noqa: S310 (http(s), checked at submit)
            return f"posted to {where(url)} (HTTP {answer.status})"
    except urllib.error.HTTPError as exc:
        exc.close()
        raise RuntimeError(f"{where(url)} answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise RuntimeError(f"{where(url)}: {getattr(reason, 'strerror', None) or reason}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a timeout while reading, a broken answer
        raise RuntimeError(f"{where(url)}: {exc or type(exc).__name__}") from None


def run_command(command: str, body: bytes, data: dict[str, Any]) -> str:
    """Run `command` with `body` on stdin and the HPCLAUNCH_NOTIFY_* variables; what came of it, in words. Raises
    OSError when it cannot start, RuntimeError when it fails or outlasts TIMEOUT (its process group then killed)."""
    env = {k: v for k, v in os.environ.items() if k != SETTINGS_ENV}
    env.update({f"{SETTINGS_ENV}_{key.upper()}": "" if value is None else str(value) for key, value in data.items()})
    proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, env=env, start_new_session=True)
    try:
        proc.communicate(body, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise RuntimeError(f"the command did not end within {TIMEOUT:g} s (killed)") from None
    if proc.returncode != 0:
        raise RuntimeError(f"the command exited with {proc.returncode}")
    return "ran the command"


def notify(settings: dict[str, Any], data: dict[str, Any]) -> None:
    """Send word to each receiver the settings name; one line each on stdout (sent) or stderr (not sent)."""
    body = (json.dumps(data) + "\n").encode()  # one line: a command may append it to a file
    webhook, command = settings.get("webhook"), settings.get("command")
    sends: list[tuple[str, Callable[[], str]]] = []
    if webhook:
        sends.append(("webhook", lambda: post(webhook, body)))
    if command:
        sends.append(("command", lambda: run_command(command, body, data)))
    about = f"job {data['job_id']} {data['state']}"
    for kind, send in sends:
        try:
            print(f"hpclaunch: notify: {about}: {send()}", flush=True)
        except (OSError, RuntimeError) as exc:
            print(f"hpclaunch: notify: {about}: no word to the {kind}: {exc}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpclaunch.runtime.node.notify", description=__doc__.split("\n")[0])
    p.add_argument("--exit-code", type=int, required=True, help="the job script's exit status")
    p.add_argument("--since", type=float, default=0.0, help="when the job script began (epoch seconds)")
    p.add_argument("--stopped", action="store_true", help="a stop signal (TERM, INT) ended the job")
    args = p.parse_args(argv)
    try:
        settings = json.loads(os.environ[SETTINGS_ENV])
    except (KeyError, ValueError) as exc:
        print(f"hpclaunch: notify: no word sent: {SETTINGS_ENV} is missing or not JSON ({exc})", file=sys.stderr)
        return 0
    data = payload(settings, args.exit_code, stopped=args.stopped, since=args.since, environ=os.environ)
    if wanted(settings.get("when") or ["ended"], data["state"]):
        notify(settings, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
