"""JobSpec: the frozen, validated result of resolve. Everything downstream reads only this.

It is saved as ``resolved.yaml`` in the run directory; that file can be submitted again as is
(``hpclaunch submit RUN_DIR/resolved.yaml``) and is what the recipe script reads inside the job.
"""

from pathlib import Path
from typing import Annotated

from hpclaunch.config.base import Meta, StrictModel, dump, validate
from hpclaunch.config.loader import is_jobspec_file
from hpclaunch.config.notify import NotifySpec
from hpclaunch.config.profile import Partition, Profile, PythonEnv
from hpclaunch.config.recipe import DeepSpeedSpec, Recipe
from hpclaunch.config.requirements import needed_by
from hpclaunch.config.tracking import TrackingSpec
from hpclaunch.core.version import __version__

__all__ = ["JobSpec", "load_jobspec", "is_jobspec_file"]


class Watchdog(StrictModel, frozen=True, kw_only=True):
    """The hang watchdog as resolved: the recipe's settings over the profile's."""

    enabled: bool = True
    timeout: Annotated[float, Meta(gt=0)] = 1800.0
    init_timeout: Annotated[float, Meta(gt=0)] = 3600.0
    min_timeout: Annotated[float, Meta(gt=0)] = 60.0
    adaptive: Annotated[bool, Meta(description="tighten to a multiple of the observed step time (profile default)")] = (
        True
    )


class Restarts(StrictModel, frozen=True, kw_only=True):
    """Relaunches inside the allocation as resolved: the recipe's (--set restarts.max) over the profile's."""

    max: Annotated[int, Meta(ge=0, le=100, description="relaunches after a fault a restart can fix")] = 0


class Health(StrictModel, frozen=True, kw_only=True):
    """Node health before step 0 as resolved: the recipe's settings (--set health.*) over the profile's."""

    enabled: bool = False
    min_free_gib: Annotated[float, Meta(ge=0)] = 1.0
    min_allreduce_gbps: Annotated[float, Meta(ge=0)] = 0.0
    allreduce: bool = True
    allreduce_mib: Annotated[int, Meta(ge=1)] = 16
    scratch: str | None = None
    timeout: Annotated[float, Meta(gt=0)] = 120.0


class Staging(StrictModel, frozen=True, kw_only=True):
    """What each node copies to its local scratch before the launch (docs/fast-start.md), as resolved."""

    python: Annotated[bool, Meta(description="the ranks run from a node-local copy of the Python environment")] = False
    assets: Annotated[bool, Meta(description="the ranks read assets from node-local copies")] = False
    python_fallback: Annotated[bool, Meta(description="a node that cannot stage the Python environment makes every "
                                          "node run the ranks from the shared one (python.stage_fallback: shared) "
                                          "instead of ending the job")] = False
    assets_fallback: Annotated[bool, Meta(description="a node that cannot copy an asset reads it from the store, "
                                          "saying so (assets.stage auto), instead of ending the job")] = False


class Resources(StrictModel, frozen=True, kw_only=True):
    """What each node's task asks beside its devices, as resolved: the recipe's resources over the devices' share
    of the node. (A resolved.yaml written before these existed reads with the defaults; resubmitting it resolves
    them again.)"""

    cpus_per_task: Annotated[int, Meta(ge=1, description="CPUs per node (one task per node)")] = 1
    cpus_per_rank: Annotated[
        int, Meta(ge=1, description="cpus_per_task / ranks per node (floor, at least 1): OMP_NUM_THREADS")
    ] = 1
    mem_mb: Annotated[
        Annotated[int, Meta(ge=0)] | None,
        Meta(
            description="memory per node in MiB (1G = 1024); 0: all of the node's; "
            "null: not asked (the scheduler's default)"
        ),
    ] = None
    exclusive: Annotated[bool, Meta(description="the nodes to this job alone (whole nodes, partition exclusive)")] = (
        False
    )


class Checkpointing(StrictModel, frozen=True, kw_only=True):
    """When the job saves before its end, as resolved: the recipe's checkpoint keys over the profile's."""

    lead_time: Annotated[int, Meta(ge=10, le=65535, description="USR1 this many seconds before the time limit")] = 120
    requeue: Annotated[bool, Meta(description="a stopped job requeues itself; false: it chains a follow-on job")] = (
        True
    )
    write_gbps: Annotated[float, Meta(gt=0, description="the filesystem's write rate (profile storage.write_gbps)")] = (
        1.0
    )
    plan_bytes: Annotated[float | None, Meta(description="the memory plan's checkpoint size, when a plan could be "
                                             "made: the first save's time estimate")] = None


class MicroBatchAuto(StrictModel, frozen=True, kw_only=True):
    """What `--set train.micro_batch_size=auto` chose, from the memory plan (hpclaunch/submission/autobatch.py)."""

    micro_batch: Annotated[int, Meta(ge=1)]
    grad_accum: Annotated[int, Meta(ge=1)]
    fits_up_to: Annotated[int, Meta(ge=1, description="the largest micro-batch within the limit")]
    per_replica: Annotated[int, Meta(ge=1, description="global batch / data parallel: what micro x accum make")]
    global_batch: Annotated[int, Meta(ge=1)]
    margin: float
    limit_gib: Annotated[float, Meta(description="device memory x (1 - margin)")]
    device_gib: float
    per_device_gib: Annotated[float, Meta(description="the plan's total per device at the chosen micro-batch")]
    next_gib: Annotated[float, Meta(description="the plan's total per device at micro-batch fits_up_to + 1")]

    @property
    def text(self) -> str:
        """One line, for the dry run and the job log."""
        def gib(x: float) -> str:
            return f"{x:.1f}" if x >= 10 else f"{x:.3g}"

        why = f"micro-batch {self.fits_up_to + 1} would need {gib(self.next_gib)} GiB"
        if self.fits_up_to == self.per_replica and self.next_gib <= self.limit_gib:
            why = f"the global batch's share per replica is {self.per_replica}"
        divides = "" if self.micro_batch == self.fits_up_to else (
            f"; {self.fits_up_to} fits but does not divide {self.per_replica}")
        return (f"micro-batch auto: {self.micro_batch} x accumulation {self.grad_accum} keeps global batch "
                f"{self.global_batch}; {gib(self.per_device_gib)} GiB per device of {gib(self.limit_gib)} GiB "
                f"({self.device_gib:g} GiB - {self.margin:.0%} margin); {why}{divides}")


class Placement(StrictModel, frozen=True, kw_only=True):
    """Where on the network the job asks to run (hpclaunch/submission/placement.py), chosen at submit from its
    tensor-parallel groups and the cluster's topology: what is asked of the scheduler and why."""

    switches: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="at most this many leaf switches")] = None
    max_wait: Annotated[str | None, Meta(description="how long the scheduler may wait for those switches")] = None
    segment: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="every this many nodes in one block")] = (
        None
    )
    text: Annotated[str, Meta(description="the choice in words, as the dry run says it")] = ""


class JobSpec(StrictModel, frozen=True, kw_only=True):
    hpclaunch_version: str = __version__
    name: Annotated[str, Meta(description="the Slurm job name")]
    recipe: Recipe
    recipe_dir: Annotated[str, Meta(description="absolute path of the recipe folder the job runs from")]
    preset: str | None = None
    profile: Profile
    profile_ref: Annotated[
        str | None,
        Meta(description="--profile as the user gave it (a name or a file), repeated in the commands hpclaunch "
             "suggests"),
    ] = None
    partition: str
    nodes: Annotated[int, Meta(ge=1)]
    gpus_per_node: Annotated[int, Meta(ge=1, description="processes (ranks) per node, one per device")]
    time: str
    grad_accum: Annotated[int, Meta(ge=1)]
    global_batch_size: Annotated[int, Meta(ge=1)]
    data_parallel: Annotated[int, Meta(ge=1)]
    sets: Annotated[tuple[str, ...], Meta(description="the --set overrides, for the record")] = ()
    watchdog: Watchdog = Watchdog()
    health: Health = Health()
    staging: Staging = Staging()
    resources: Annotated[Resources, Meta(description="CPUs and memory per node, as resolved")] = Resources()
    checkpoint: Annotated[Checkpointing, Meta(description="saving before the time limit, as resolved")] = (
        Checkpointing()
    )
    resumable: Annotated[
        bool,
        Meta(
            description="the script resumes from its checkpoints: a job stopped by "
            "preemption or the time limit may requeue (recipe checkpoint.resumable)"
        ),
    ] = True
    tracking: Annotated[
        TrackingSpec,
        Meta(
            description="the trackers as resolved: the recipe's keys over the profile's; wandb is null when W&B is off"
        ),
    ] = TrackingSpec()
    retries: Annotated[
        int, Meta(ge=0, le=100, description="resubmissions after a node-level failure (submit --retries)")
    ] = 0
    restarts: Restarts = Restarts()
    notify: Annotated[NotifySpec, Meta(description="word when the job ends, as resolved: --notify over the recipe's "
                                       "keys over the profile's; `when` given (default [ended])")] = NotifySpec()
    spare_nodes: Annotated[int, Meta(ge=0, le=1000, description="nodes asked beyond `nodes` that idle until a node "
                                     "is dropped, then take its place (submit --spare-nodes)")] = 0
    inject: Annotated[str | None, Meta(description="fault injection KIND:RANK:STEP[,...] (HPCLAUNCH_INJECT at "
                                       "submit)")] = None
    micro_batch_auto: Annotated[MicroBatchAuto | None, Meta(
        description="what --set train.micro_batch_size=auto chose (null: the micro-batch was given)")] = None
    placement: Annotated[Placement | None, Meta(
        description="the network placement chosen at submit (null: none chosen, nothing asked)")] = None
    sbatch: Annotated[
        dict[str, str | None],
        Meta(
            description="submit --sbatch KEY=VALUE: #SBATCH options over the profile's sbatch_extra (null: a bare flag)"
        ),
    ] = {}

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def layout(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"

    @property
    def requires(self) -> dict[str, str]:
        """The packages the job's environment must hold, at these versions or newer (RUN_DIR/requires.json, read
        by each node before its ranks start, and by preflight where the environment is visible): none for a
        user's own script (submit SCRIPT.py, a recipe of task test)."""
        return needed_by(self.recipe.launcher, self.recipe.adhoc or self.recipe.task == "test")

    @property
    def zero_stage(self) -> int:
        """The ZeRO stage the job runs (0 without DeepSpeed): the recipe's, except on a single rank without
        offload, where ZeRO partitions over one rank (saving nothing) and stage 3 still gathers and releases
        every layer's parameters around its use: stage 0 there."""
        if self.recipe.launcher != "deepspeed":
            return 0
        ds = self.deepspeed
        if self.world_size == 1 and not (ds.offload_optimizer or ds.offload_param):
            return 0
        return ds.zero_stage

    @property
    def deepspeed(self) -> DeepSpeedSpec:
        """The recipe's DeepSpeed settings; a recipe without a deepspeed: section gets the launcher's defaults."""
        return self.recipe.deepspeed or DeepSpeedSpec()

    @property
    def partition_spec(self) -> Partition:
        return self.profile.partitions[self.partition]

    @property
    def python_env(self) -> PythonEnv:
        return self.profile.python_env_for(self.recipe.python_env)

    @property
    def script_path(self) -> Path:
        return Path(self.recipe_dir) / self.recipe.script

    @property
    def profile_arg(self) -> str:
        """The profile as a command hpclaunch suggests must name it: what the user gave to --profile (a name or a
        file), shell-quoted."""
        import shlex

        return shlex.quote(self.profile_ref or self.profile.name)

    @property
    def recipe_arg(self) -> str:
        """The recipe as a command hpclaunch suggests must name it, shell-quoted: its name where the name finds
        this very folder, else the folder (an ad-hoc recipe: the script)."""
        import shlex

        from hpclaunch.core.paths import search_dirs

        name = self.recipe.name
        if self.recipe.adhoc:
            return shlex.quote(str(self.script_path))
        folder = Path(self.recipe_dir).resolve()
        found = next((d / name for d in search_dirs("recipes") if (d / name / "recipe.yaml").is_file()), None)
        return shlex.quote(name if found is not None and found.resolve() == folder else str(folder))

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(dump(self), sort_keys=False, allow_unicode=True)


def load_jobspec(path: str | Path) -> JobSpec:
    """Load a resolved.yaml (inside a job, or to resubmit it)."""
    p = Path(path)
    from hpclaunch.config.yamlfile import read_yaml

    return validate(JobSpec, read_yaml(p), file=str(p))
