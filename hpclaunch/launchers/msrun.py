"""MindSpore's msrun: one msrun per node (started by srun), the head node as master, the node rank
from Slurm, per-node log folders inside the run directory, --join=True."""

from __future__ import annotations

from pathlib import Path

from hpclaunch.jobspec import JobSpec
from hpclaunch.launchers.base import Launcher, Word, device_visibility
from hpclaunch.render.shell import ShellExpr, join

# msrun ignores SIGTERM and returns only 0 or 1. On cancel or time limit Slurm sends SIGTERM to this
# node script, which interrupts msrun's process group (SIGINT, which msrun handles) and then kills
# whatever is left of its workers and scheduler.
_SUPERVISE = """setsid {command} &
MSRUN_PID=$!
stop_msrun() {{ kill -INT -- -"$MSRUN_PID" 2>/dev/null; sleep 5; kill -KILL -- -"$MSRUN_PID" 2>/dev/null; }}
trap 'stop_msrun; exit 143' TERM
trap 'stop_msrun; exit 130' INT
wait "$MSRUN_PID"
"""


class MsrunLauncher(Launcher):
    name = "msrun"

    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        ms = spec.recipe.msrun
        timeout = ms.cluster_time_out if ms else 600
        port = ShellExpr("--master_port=${MASTER_PORT}")
        if ms and ms.master_port:
            port = f"--master_port={ms.master_port}"
        return [
            "msrun",
            f"--worker_num={spec.world_size}",
            f"--local_worker_num={spec.gpus_per_node}",
            ShellExpr("--master_addr=${MASTER_IP}"),
            port,
            ShellExpr("--node_rank=${SLURM_NODEID}"),
            ShellExpr("--log_dir=${HPCLAUNCH_LOG_DIR}/msrun/node${SLURM_NODEID}.restart-${HPCLAUNCH_RESTART}"),
            "--join=True",
            f"--cluster_time_out={timeout}",
            str(spec.script_path),
            *self.script_args(spec, run_dir),
        ]

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        command = join(self.node_command(spec, run_dir))
        return "\n".join([*device_visibility(spec), _SUPERVISE.format(command=command)])
