"""The launcher interface.

The job script exports, before any launcher runs: HPCLAUNCH_RUN_DIR, HPCLAUNCH_CONFIG (the
resolved.yaml), HPCLAUNCH_LOG_DIR, HPCLAUNCH_RESTART (Slurm's restart count), MASTER_ADDR (the head
node's host name), MASTER_IP (its address) and MASTER_PORT (derived from the job id). Inside each
node's step, SLURM_NODEID is the node rank.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.render.shell import ShellExpr, join, quote

if TYPE_CHECKING:
    from hpclaunch.jobspec import JobSpec

Word = str | ShellExpr


def device_visibility(spec: JobSpec) -> list[str]:
    """Shell lines that make each node's devices visible under the accelerator's own variable.

    Slurm's gres plugin sets CUDA_VISIBLE_DEVICES for the allocated GPUs; MUSA and Ascend read their
    own variables, which are set from it (or to all devices of the node when Slurm set nothing).
    """
    var = spec.profile.visible_devices_var
    if var is None:
        return []
    every = ",".join(str(i) for i in range(spec.gpus_per_node))
    return [f"export {var}={quote(ShellExpr('${CUDA_VISIBLE_DEVICES:-' + every + '}'))}"]


class Launcher(ABC):
    name: str
    #: the template block under templates/launchers/ that starts the node commands
    template = "launchers/srun.sh.j2"

    @abstractmethod
    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        """The argv each node runs (inside one srun task per node, or directly on a local machine)."""

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        """The shell text each node's task runs: device visibility, then the node command."""
        return "\n".join([*device_visibility(spec), "exec " + join(self.node_command(spec, run_dir))])

    def files(self, spec: JobSpec) -> dict[str, str]:
        """Extra files written into the run directory, name -> content."""
        return {}

    def script_args(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        """Arguments every recipe script gets: where its resolved config is, then the recipe's own."""
        return ["--config", str(run_dir / "resolved.yaml"), *spec.recipe.args]
