"""MindSpore's msrun: one msrun per node (started by srun), the head node as master, the node rank
from Slurm, per-node log folders inside the run directory, --join=True.

msrun's own behaviour shapes the node script (FACTS.md, docs/mindspore.md):

- it returns only 0 or 1, so each worker runs through ``msrun_worker.py`` (written into the run
  directory), which records a failing worker's real exit code in ``worker_<rank>.exit``; after msrun
  returns, the node script names the failed worker and exits with that code, so the job ends FAILED
  with the worker's code;
- it handles SIGINT but not SIGTERM, and starts every worker in its own session: on cancel or time
  limit (SIGTERM from Slurm) the node script interrupts msrun, then kills every process still
  carrying this node's ``HPCLAUNCH_MSRUN_TAG`` (workers and scheduler, even once orphaned).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.launchers.base import Launcher, Word, device_visibility
from hpclaunch.render.shell import ShellExpr, join

if TYPE_CHECKING:
    from hpclaunch.jobspec import JobSpec

NODE_SCRIPT = "msrun-node.sh"
WORKER_WRAPPER = "msrun_worker.py"
LOG_DIR = "${HPCLAUNCH_LOG_DIR}/msrun/node${SLURM_NODEID:-0}.restart-${HPCLAUNCH_RESTART}"

# Runs on every node: `bash RUN_DIR/msrun-node.sh msrun ARGS...`. Kill grace stays under Slurm's
# KillWait (30 s by default; 5 s on the dev cluster).
_NODE_SH = r"""#!/bin/bash
# Written by hpclaunch: supervises one msrun on this node (see hpclaunch/launchers/msrun.py).
# Usage: msrun-node.sh msrun ARGS...   (env: HPCLAUNCH_LOG_DIR, HPCLAUNCH_RESTART, SLURM_NODEID)
LOG="${HPCLAUNCH_LOG_DIR}/msrun/node${SLURM_NODEID:-0}.restart-${HPCLAUNCH_RESTART:-0}"
mkdir -p "$LOG"
export HPCLAUNCH_MSRUN_STATUS_DIR="$LOG"
TAG="${SLURM_JOB_ID:-local}.${SLURM_NODEID:-0}.$$"
# the tag marks msrun, its scheduler and its workers (each in its own session) for the cleanup
HPCLAUNCH_MSRUN_TAG="$TAG" setsid "$@" > >(tee -a "$LOG/msrun.out") 2>&1 &
MSRUN_PID=$!
tagged() { grep -lsxz "HPCLAUNCH_MSRUN_TAG=$TAG" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
cleanup() {
  local i pids
  kill -INT "$MSRUN_PID" 2>/dev/null   # msrun handles SIGINT: it kills its workers and scheduler
  for i in 1 2 3; do
    pids=$(tagged); [ -z "$pids" ] && return 0
    sleep 1
  done
  pids=$(tagged)
  [ -n "$pids" ] && echo "hpclaunch: node ${SLURM_NODEID:-0}: killing msrun processes left:" $pids >&2
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  return 0
}
# Stopped from outside: by cancel or time limit, or by srun because a worker on another node failed;
# then exit with that worker's code, as srun reports the highest code of all nodes.
peer_failure() {
  local f rank code
  f=$(ls -tr "${HPCLAUNCH_LOG_DIR}"/msrun/node*.restart-"${HPCLAUNCH_RESTART:-0}"/worker_*.exit 2>/dev/null \
    | head -n1)
  [ -n "$f" ] && read -r rank code < "$f" && echo "$code"
}
trap 'cleanup; code=$(peer_failure); exit "${code:-143}"' TERM
trap 'cleanup; exit 130' INT
# USR1: the job is about to be requeued (preemption or time limit); stop everything cleanly first
trap 'cleanup; exit 138' USR1
wait "$MSRUN_PID"
rc=$?
cleanup
[ "$rc" -eq 0 ] && exit 0
# msrun says only 1: find the worker that failed first and carry its own exit code
first=$(ls -tr "$LOG"/worker_*.exit 2>/dev/null | head -n1)
if [ -n "$first" ]; then
  read -r rank code < "$first"
  echo "hpclaunch: msrun worker rank ${rank} on node ${SLURM_NODEID:-0} failed with exit code" \
    "${code}; log: $LOG/worker_${rank}.log" >&2
  grep -v '^\[' "$LOG/worker_${rank}.log" 2>/dev/null | tail -n 5 | sed 's/^/hpclaunch:   /' >&2
  exit "$code"
fi
code=$(grep -o 'exit with exception. Error code: -\?[0-9]*' "$LOG/msrun.out" 2>/dev/null \
  | head -n1 | grep -o -- '-\?[0-9]*$')
if [ -n "$code" ] && [ "$code" -lt 0 ]; then
  echo "hpclaunch: an msrun worker on node ${SLURM_NODEID:-0} was killed by signal" \
    "$(( -code )); logs: $LOG" >&2
  exit $(( 128 - code ))
fi
echo "hpclaunch: msrun on node ${SLURM_NODEID:-0} failed (exit ${rc}, ${code:+worker code ${code}, }no" \
  "worker status); see $LOG/scheduler.log (node 0) and $LOG/msrun.out" >&2
exit "$rc"
"""

_WORKER_PY = '''"""Written by hpclaunch: msrun runs this for every worker (and its scheduler). It runs
the recipe script as __main__ and, when a worker fails, writes "<rank> <code>" to $HPCLAUNCH_MSRUN_STATUS_DIR/
worker_<rank>.exit, because msrun itself returns only 0 or 1."""
import os
import runpy
import sys
import traceback

script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
code = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if not isinstance(exc.code, (int, type(None))):
        print(exc.code, file=sys.stderr)
except BaseException:
    traceback.print_exc()
    code = 1
finally:
    status_dir = os.environ.get("HPCLAUNCH_MSRUN_STATUS_DIR")
    if code and os.environ.get("MS_ROLE") == "MS_WORKER":
        rank = os.environ.get("RANK_ID", "unknown")
        # one error line in the worker's own log, so that `hpclaunch logs --diagnose` finds this rank
        print("WorkerExitError: msrun worker rank %s exited with code %d" % (rank, code), file=sys.stderr)
        if status_dir:
            with open(os.path.join(status_dir, "worker_%s.exit" % rank), "w") as f:
                f.write("%s %d\\n" % (rank, code))
sys.stdout.flush()
sys.stderr.flush()
sys.exit(code)
'''


class MsrunLauncher(Launcher):
    name = "msrun"

    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        ms = spec.recipe.msrun
        timeout = ms.cluster_time_out if ms else 600
        port: Word = ShellExpr("--master_port=${MASTER_PORT}")
        if ms and ms.master_port:
            port = f"--master_port={ms.master_port}"
        return [
            "msrun",
            f"--worker_num={spec.world_size}",
            f"--local_worker_num={spec.gpus_per_node}",
            ShellExpr("--master_addr=${MASTER_IP}"),
            port,
            ShellExpr("--node_rank=${SLURM_NODEID:-0}"),
            ShellExpr(f"--log_dir={LOG_DIR}"),
            "--join=True",
            f"--cluster_time_out={timeout}",
            str(run_dir / WORKER_WRAPPER),
            str(spec.script_path),
            *self.script_args(spec, run_dir),
        ]

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        command = join(["bash", str(run_dir / NODE_SCRIPT), *self.node_command(spec, run_dir)])
        return "\n".join([*device_visibility(spec), "exec " + command])

    def files(self, spec: JobSpec) -> dict[str, str]:
        return {NODE_SCRIPT: _NODE_SH, WORKER_WRAPPER: _WORKER_PY}
