"""The launcher interface.

A launcher sees only the neutral variables the job script exports before it runs, whatever the
scheduler: HPCLAUNCH_JOB_ID, HPCLAUNCH_NNODES, HPCLAUNCH_NODELIST, HPCLAUNCH_HEAD_NODE,
HPCLAUNCH_RESTART (0, then +1 per requeue), HPCLAUNCH_RUN_DIR, HPCLAUNCH_CONFIG (the resolved.yaml),
HPCLAUNCH_LOG_DIR, MASTER_ADDR (the head node's host name), MASTER_IP (its address) and MASTER_PORT
(derived from the job id); inside each node's task, HPCLAUNCH_NODE_RANK. The run directory's file names
come from `hpclaunch.state.runfiles`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.rules import VISIBLE_DEVICES_VAR
from hpclaunch.core.shell import ShellExpr, join, quote
from hpclaunch.launchers import containers
from hpclaunch.state.runfiles import RunFiles

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec

Word = str | ShellExpr


def device_visibility(spec: JobSpec) -> list[str]:
    """Shell lines that make each node's devices visible under the accelerator's own variable.

    Slurm's gres plugin sets CUDA_VISIBLE_DEVICES for the allocated GPUs; MUSA reads its own variable,
    set from it. Slurm sets nothing an Ascend runtime reads for an `npu` GRES: its devices come from the
    indices the scheduler allocated (HPCLAUNCH_DEVICES, exported by the scheduler's step part), else from
    CUDA_VISIBLE_DEVICES. With neither, every device of the node (the job has the node to itself).
    """
    var = spec.profile.visible_devices_var
    if var is None:
        return []
    every = ",".join(str(i) for i in range(spec.gpus_per_node))
    if var == VISIBLE_DEVICES_VAR["npu"]:
        # a literal line (no user value in it): the nested default is more than a ShellExpr allows
        return [f'export {var}="${{HPCLAUNCH_DEVICES:-${{CUDA_VISIBLE_DEVICES:-{every}}}}}"']
    return [f"export {var}={quote(ShellExpr('${CUDA_VISIBLE_DEVICES:-' + every + '}'))}"]


def launch_lines(spec: JobSpec, run_dir: Path, command: list[Word], *, per_rank: bool = False) -> list[str]:
    """The shell text of a node's task: device visibility, the container's variables, then `command` under the
    node supervisor, inside the profile's container where it has one (hpclaunch/launchers/containers.py). An own
    script (`submit SCRIPT.py`) runs in the copy of its folder, as `python SCRIPT.py` would in the folder itself:
    `open("override_config.json")` finds the file beside it. `per_rank`: `command` is one rank's, which the
    supervisor starts once per local rank (no launcher agent)."""
    wrapped = containers.wrap(spec, run_dir, supervised(spec, command, per_rank=per_rank), launch=True)
    here = [f"cd {quote(spec.recipe_dir)} || exit 1"] if spec.recipe.adhoc else []
    return [*device_visibility(spec), *containers.node_env(spec), *here, "exec " + join(wrapped)]


def supervised(spec: JobSpec, command: list[Word], *, per_rank: bool = False) -> list[Word]:
    """`command` run by the node supervisor, hpclaunch/runtime/node/supervise.py, with the resolved watchdog;
    `per_rank`: once per local rank, with each rank's environment (hpclaunch/runtime/node/ranks.py)."""
    w = spec.watchdog
    words: list[Word] = [spec.python_env.executable, "-m", "hpclaunch.runtime.node.supervise"]
    if w.enabled:
        words += [f"--timeout={w.timeout:g}", f"--init-timeout={w.init_timeout:g}", f"--min-timeout={w.min_timeout:g}"]
        words += ["--adaptive"] if w.adaptive else []
    else:
        words += ["--no-watchdog"]
    words += [f"--ranks={spec.nodes}:{spec.gpus_per_node}"] if per_rank else []
    return [*words, "--", *command]


class Launcher(ABC):
    name: str
    #: the template block under templates/launchers/ that starts the node commands
    template = "launchers/nodes.sh.j2"
    #: run-directory files rendered from templates: file name -> template (same context as the job script)
    templates: dict[str, str] = {}
    #: programs the node command runs from the job's PATH -> what installs them (preflight checks them where it can)
    programs: dict[str, str] = {}

    @abstractmethod
    def node_command(self, spec: JobSpec, run_dir: Path) -> list[Word]:
        """The argv each node runs (inside the scheduler's one task per node)."""

    def node_script(self, spec: JobSpec, run_dir: Path) -> str:
        """The shell text each node's task runs: device visibility, then the node command under the node
        supervisor (hang watchdog, signal passing, cleanup), in the profile's container if any."""
        return "\n".join(launch_lines(spec, run_dir, self.node_command(spec, run_dir)))

    def script_context(self, spec: JobSpec, run_dir: Path) -> dict[str, Any]:
        """Values this launcher's own templates use (as ``launch``)."""
        return {}

    def files(self, spec: JobSpec) -> dict[str, str]:
        """Extra files written into the run directory, name -> content."""
        return {}

    def script_args(self, spec: JobSpec, run_dir: Path, *hpclaunch_args: Word) -> list[Word]:
        """Arguments a recipe script gets: where its resolved config is (and the launcher's `hpclaunch_args`),
        then the recipe's own. An ad-hoc script (`submit SCRIPT.py -- ARGS`) gets only its own: it finds
        its config in HPCLAUNCH_CONFIG, which the job script exports for every script."""
        if spec.recipe.adhoc:
            return [*spec.recipe.args]
        return ["--config", str(RunFiles(run_dir).resolved), *spec.recipe.args, *hpclaunch_args]
