"""torchrun: one agent per node, c10d rendezvous on the head node, each rank wrapped by rank_exec
so that its output is kept in its own log file (per restart). With `launch.agent: none` (and `auto`, the
default) there is no agent:
the node supervisor starts each rank's rank_exec itself with torchrun's variables
(hpclaunch/runtime/node/ranks.py) and the ranks meet through env:// on MASTER_ADDR:MASTER_PORT."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.core.shell import ShellExpr
from hpclaunch.launchers.base import Launcher, Word, launch_lines

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec


def torchrun_words(spec: JobSpec) -> list[Word]:
    python = spec.python_env.executable
    # torch.distributed.run, started by hpclaunch/runtime/train/agent.py: the same agent, quiet on a stop signal
    words: list[Word] = [python, "-m", "hpclaunch.runtime.train.agent"]
    if spec.nodes == 1:
        words += ["--standalone", f"--nproc-per-node={spec.gpus_per_node}"]
    else:
        words += [
            f"--nnodes={spec.nodes}",
            f"--nproc-per-node={spec.gpus_per_node}",
            "--rdzv-backend=c10d",
            ShellExpr("--rdzv-endpoint=${HPCLAUNCH_HEAD_NODE}:${MASTER_PORT}"),
            ShellExpr("--rdzv-id=${HPCLAUNCH_JOB_ID}"),
        ]
    # A failed rank ends the job (no elastic restarts inside the allocation; Slurm requeues instead).
    words += ["--max-restarts=0", "-m", "hpclaunch.runtime.node.rank_exec"]
    return words


class TorchrunLauncher(Launcher):
    name = "torchrun"

    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        if spec.recipe.agentless:  # one rank's command: the supervisor starts it per local rank
            return [spec.python_env.executable, "-m", "hpclaunch.runtime.node.rank_exec", str(spec.script_path),
                    *self.script_args(spec, run_dir)]
        return [*torchrun_words(spec), str(spec.script_path), *self.script_args(spec, run_dir)]

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        per_rank = spec.recipe.agentless
        return "\n".join(launch_lines(spec, run_dir, self.node_command(spec, run_dir), per_rank=per_rank))
