"""The launcher interface.

A launcher sees only the neutral variables the job script exports before it runs, whatever the
scheduler: HPCLAUNCH_JOB_ID, HPCLAUNCH_NNODES, HPCLAUNCH_NODELIST, HPCLAUNCH_HEAD_NODE,
HPCLAUNCH_RESTART (0, then +1 per requeue), HPCLAUNCH_RUN_DIR, HPCLAUNCH_CONFIG (the resolved.yaml),
HPCLAUNCH_LOG_DIR, MASTER_ADDR (the head node's host name), MASTER_IP (its address) and MASTER_PORT
(derived from the job id); inside each node's task, HPCLAUNCH_NODE_RANK. The run directory's file names
come from `hpclaunch.runfiles`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.runfiles import RunFiles
from hpclaunch.shell import ShellExpr, join, quote

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


def supervised(spec: JobSpec, command: list[Word]) -> list[Word]:
    """`command` run by the node supervisor, hpclaunch/runtime/supervise.py, with the resolved watchdog."""
    w = spec.watchdog
    words: list[Word] = [spec.python_env.executable, "-m", "hpclaunch.runtime.supervise"]
    if w.enabled:
        words += [f"--timeout={w.timeout:g}", f"--init-timeout={w.init_timeout:g}", f"--min-timeout={w.min_timeout:g}"]
        words += ["--adaptive"] if w.adaptive else []
    else:
        words += ["--no-watchdog"]
    return [*words, "--", *command]


class Launcher(ABC):
    name: str
    #: the template block under templates/launchers/ that starts the node commands
    template = "launchers/nodes.sh.j2"
    #: run-directory files rendered from templates: file name -> template (same context as the job script)
    templates: dict[str, str] = {}

    @abstractmethod
    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        """The argv each node runs (inside the scheduler's one task per node)."""

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        """The shell text each node's task runs: device visibility, then the node command under the node
        supervisor (hang watchdog, signal passing, cleanup)."""
        return "\n".join([*device_visibility(spec), "exec " + join(supervised(spec, self.node_command(spec, run_dir)))])

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        """Values this launcher's own templates use (as ``launch``)."""
        return {}

    def files(self, spec: JobSpec) -> dict[str, str]:
        """Extra files written into the run directory, name -> content."""
        return {}

    def script_args(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        """Arguments every recipe script gets: where its resolved config is, then the recipe's own."""
        return ["--config", str(RunFiles(run_dir).resolved), *spec.recipe.args]
