"""MindSpore's msrun: one msrun per node (started by the scheduler's step), the head node as master,
the node rank from HPCLAUNCH_NODE_RANK, per-node log folders inside the run directory, --join=True.

msrun's own behaviour shapes the node command (FACTS.md, docs/mindspore.md): it returns only 0 or 1,
and it handles SIGINT but not SIGTERM. So each node runs msrun under a supervisor,
``RUN_DIR/msrun-node.sh`` (rendered from templates/launchers/msrun-node.sh.j2), and each worker through
``RUN_DIR/msrun_worker.py`` (a copy of hpclaunch/runtime/node/msrun_worker.py), which records a failing
worker's real exit code for the supervisor.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.core.shell import ShellExpr
from hpclaunch.launchers.base import Launcher, Word, launch_lines
from hpclaunch.state import runfiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

# This node's msrun log folder of this restart, as the shell on the node spells it.
LOG_DIR = (f"${{{runfiles.ENV_LOG_DIR}}}/{runfiles.MSRUN_LOGS}/"
           + runfiles.msrun_node_name("${HPCLAUNCH_NODE_RANK:-0}", "${HPCLAUNCH_RESTART:-0}"))
_WORKER_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "node" / "msrun_worker.py"


class MsrunLauncher(Launcher):
    name = "msrun"
    templates = {runfiles.MSRUN_NODE_SCRIPT: "launchers/msrun-node.sh.j2"}
    programs = {"msrun": "MindSpore (docs/mindspore.md)"}

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
            ShellExpr("--node_rank=${HPCLAUNCH_NODE_RANK:-0}"),
            ShellExpr(f"--log_dir={LOG_DIR}"),
            "--join=True",
            f"--cluster_time_out={timeout}",
            str(runfiles.RunFiles(run_dir).msrun_worker),
            str(spec.script_path),
            *self.script_args(spec, run_dir),
        ]

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        supervisor = runfiles.RunFiles(run_dir).msrun_node_script
        return "\n".join(launch_lines(spec, run_dir, ["bash", str(supervisor), *self.node_command(spec, run_dir)]))

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        return {
            "log_dir": ShellExpr(LOG_DIR),
            "status_var": runfiles.ENV_MSRUN_STATUS_DIR,
            "msrun_out": "msrun.out",
            "exit_glob": runfiles.msrun_exit_name("*"),
            "stop_file": runfiles.MSRUN_STOP,
            "all_nodes_glob": runfiles.MSRUN_LOGS + "/" + runfiles.msrun_node_name("*", '"${HPCLAUNCH_RESTART:-0}"'),
        }

    def files(self, spec: JobSpec) -> dict[str, str]:
        return {runfiles.MSRUN_WORKER: _WORKER_SOURCE.read_text(encoding="utf-8")}
