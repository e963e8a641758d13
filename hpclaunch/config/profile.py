"""Cluster profiles: what a cluster offers and how a job sets itself up there."""

from typing import Annotated, Literal

from hpclaunch.config import rules
from hpclaunch.config.base import Meta, SlurmTimeText, StrictModel
from hpclaunch.config.notify import NotifySpec
from hpclaunch.config.rules import BACKENDS, VISIBLE_DEVICES_VAR
from hpclaunch.config.topology import TopologyConfig
from hpclaunch.config.tracking import TrackingSpec
from hpclaunch.core.backends import SCHEDULERS, can

#: a name in the table of hpclaunch/core/backends.py, checked against the table when a profile is validated
SchedulerName = Annotated[str, Meta(extra={"check": rules.scheduler_name},
                                    extra_json_schema={"enum": list(SCHEDULERS)})]

Accelerator = Literal["cuda", "musa", "npu", "cpu"]
Backend = Literal["nccl", "mccl", "hccl", "gloo"]
#: environment variables: numbers and booleans in the file become text; null, lists and mappings are refused
EnvStrings = Annotated[dict[str, str], Meta(extra={"before": rules.env_strings})]

# BACKENDS (which collective backends make sense on which accelerator) and VISIBLE_DEVICES_VAR live in
# hpclaunch/config/rules.py with the checks the models run.
__all__ = ["BACKENDS", "VISIBLE_DEVICES_VAR", "EnvStrings", "Partition", "Modules", "PythonEnv", "AssetConfig",
           "ContainerConfig", "CheckpointDefaults", "StorageDefaults", "ProfileDefaults", "Profile", "RestartDefaults",
           "HealthDefaults", "StragglerDefaults"]


class Partition(StrictModel, frozen=True, kw_only=True):
    gpus_per_node: Annotated[int, Meta(ge=1, description="devices (or, on CPU, processes) per node",
                                       extra={"check": rules.devices_per_node})]
    gpu_type: str | None = None
    gpu_memory_gb: float | None = None
    peak_tflops: Annotated[float | None, Meta(description="dense bf16/fp16 peak per device, for MFU")] = None
    cpus_per_node: Annotated[int, Meta(ge=1, description="a job on part of a node asks its devices' share of these")]
    cpu_model: str | None = None
    memory_gb: Annotated[Annotated[float, Meta(gt=0)] | None, Meta(
        description="memory per node (GiB, as Slurm counts); given, a job on part of a node asks its devices' "
                    "share of it")] = None
    max_time: Annotated[SlurmTimeText, Meta(extra={"check": rules.slurm_time})] = "1-00:00:00"
    max_nodes: Annotated[int, Meta(ge=1)] = 1
    gres: Annotated[str | None, Meta(description="generic resource to request per node; null: none")] = "gpu"
    exclusive: Annotated[bool, Meta(description="a job on whole nodes (every device) has them to itself (Slurm "
                                                "--exclusive); a job on part of a node shares it either way")] = False
    cost_per_device_hour: Annotated[Annotated[float, Meta(ge=0)] | None, Meta(
        description="what one device-hour costs here (in the site's currency): `hpclaunch report` and `compare` "
                    "show a job's cost from it")] = None


class Modules(StrictModel, frozen=True, kw_only=True):
    init: Annotated[str | None, Meta(description="shell file sourced so that `module` works in batch jobs")] = None
    purge: bool = False
    use: tuple[str, ...] = ()
    load: tuple[str, ...] = ()


#: auto: node-local for a job of several nodes outside a container, else shared (docs/fast-start.md#the-default-auto)
StageWhere = Literal["auto", "shared", "node-local"]
#: what the job does when a node cannot stage the python environment (python.stage node-local)
StageFallback = Literal["fail", "shared"]


class PythonEnv(StrictModel, frozen=True, kw_only=True):
    executable: str = "python"
    conda_init: str | None = None
    conda_env: str | None = None
    venv: str | None = None
    stage: Annotated[StageWhere, Meta(description="node-local: the ranks run from a copy of this environment on "
                                      "each node's local scratch, packed once per content hash into the asset "
                                      "store (docs/fast-start.md); shared: from where it is; auto: node-local for "
                                      "a job of several nodes not in a container, falling back to shared when "
                                      "packing or copying fails, else shared")] = "auto"
    stage_fallback: Annotated[StageFallback, Meta(
        description="python.stage node-local, when packing the environment or copying it onto a node fails (too "
                    "little local scratch, a corrupt image, squashfs-tools missing): fail ends the job before the "
                    "launch, naming the node and the cause; shared runs every node's ranks from the shared "
                    "environment instead, saying so in the job's output and each node's rank log")] = "fail"

    def __post_init__(self) -> None:
        rules.one_python_env(self)


class AssetConfig(StrictModel, frozen=True, kw_only=True):
    store: Annotated[str | None, Meta(description="the asset store; default: $SCRATCH/hpclaunch/assets (or $PSCRATCH, "
                                      "$SCRATCHDIR, $WORK) for a cluster profile where the login node sets one, "
                                      "else ~/.hpclaunch/assets")] = None
    mirror: Annotated[str | None, Meta(description="hub endpoint used when staging, e.g. https://hf-mirror.com")] = None
    endpoints: Annotated[tuple[str, ...], Meta(description="fallback endpoints tried after the mirror")] = ()
    stage: Annotated[StageWhere, Meta(description="node-local: each node reads the job's model, tokenizer and data "
                                      "from a copy on its local scratch, made once per node and checked against "
                                      "the store's manifest (docs/fast-start.md); shared: from the store; auto: "
                                      "node-local for a job of several nodes not in a container, reading the store "
                                      "where a node cannot copy, else shared")] = "auto"


class WatchdogDefaults(StrictModel, frozen=True, kw_only=True):
    """The hang watchdog on this cluster (docs/troubleshooting.md#failure-handling)."""

    enabled: bool = True
    timeout: Annotated[float, Meta(gt=0, le=14 * 86400, description="seconds without progress on any rank before "
                                   "the job is ended as hung; tightens after the first steps to 5x the observed step "
                                   "time (never below min_timeout) unless the recipe or --set gives watchdog.timeout")
                       ] = 1800.0
    init_timeout: Annotated[float, Meta(gt=0, le=14 * 86400, description="seconds allowed before the first step "
                                        "(imports, rendezvous, model load)")] = 3600.0
    min_timeout: Annotated[float, Meta(gt=0, description="the floor of the tightened timeout")] = 60.0


class RestartDefaults(StrictModel, frozen=True, kw_only=True):
    """Relaunches inside the allocation after a fault a restart can fix (docs/troubleshooting.md#recovery)."""

    max: Annotated[Annotated[int, Meta(ge=0, le=100)] | None, Meta(
        description="relaunches of the training step in the same allocation (from node memory or the newest "
                    "checkpoint) after a node lost, a hang, a rank killed or a device/network fault; default: 3 on "
                    "Slurm schedulers, 0 on the local one")] = None
    failures_per_node_hour: Annotated[float, Meta(ge=0, le=1, description=(
        "failures a node meets per hour of a job, for the goodput `submit` promises; default 1/(7.9 h x 128 "
        "nodes) = 0.000989: Meta's projected MTTF of 7.9 h for a 1,024-GPU job (8 GPUs a node), Kokolis et al., "
        "Revisiting Reliability in Large-Scale Machine Learning Research Clusters, HPCA 2025, arXiv:2410.21680"))
                                      ] = 0.000989
    recovery_time: Annotated[float, Meta(ge=0, le=86400, description=(
        "seconds from a fault to the next training step, for the goodput `submit` promises while no earlier run "
        "of the recipe has measured a recovery (relaunch, start-up, checkpoint load)"))] = 300.0


class HealthDefaults(StrictModel, frozen=True, kw_only=True):
    """Node health before step 0 on this cluster (docs/troubleshooting.md#node-health-before-step-0)."""

    enabled: Annotated[bool | None, Meta(description="check every node before the launch; default (null): on for "
                                         "Slurm schedulers, off for local")] = None
    min_free_gib: Annotated[float, Meta(ge=0, description="GiB that must be free on the run directory's filesystem "
                                        "and on node-local scratch")] = 1.0
    min_allreduce_gbps: Annotated[float, Meta(ge=0, description="the least bandwidth (GB/s) of each node's links "
                                              "to its ceil(log2 N) partners (their median); 0: measured, never "
                                              "failing")] = 0.0
    allreduce: Annotated[bool, Meta(description="check the links between nodes, pair by pair in "
                                    "ceil(log2 N) rounds (needs torch in the job's python)")] = True
    allreduce_mib: Annotated[int, Meta(ge=1, le=4096, description="MiB exchanged each way per link")] = 16
    scratch: Annotated[str | None, Meta(description="node-local scratch to check; default: $TMPDIR, else /tmp")
                       ] = None
    timeout: Annotated[float, Meta(gt=0, le=3600, description="seconds the all-reduce may wait for every node")
                       ] = 120.0


class StragglerDefaults(StrictModel, frozen=True, kw_only=True):
    """Stragglers named in status, watch and report, and slow nodes swapped for spares
    (docs/troubleshooting.md#stragglers)."""

    factor: Annotated[float, Meta(gt=1, le=100, description="a rank whose step time over the window is more than "
                                  "this many times the median rank's is a straggler")] = 1.2
    window: Annotated[int, Meta(ge=2, le=10000, description="the last steps each rank's step time is taken over")
                      ] = 10
    windows: Annotated[int, Meta(ge=0, le=100, description=(
        "a node slower than `factor` x the median in this many consecutive windows of `window` steps is blamed: "
        "swapped for a free spare node at the next log step (a checkpoint), else reported; 0: never blamed"))] = 5
    max_swaps: Annotated[int, Meta(ge=0, le=100, description=(
        "slow nodes swapped for spare nodes in one allocation, each one of the restarts.max relaunches; "
        "0: slow nodes are only reported"))] = 1


class ContainerConfig(StrictModel, frozen=True, kw_only=True):
    """Where each node's launch runs (docs/containers.md)."""

    runtime: Annotated[Literal["none", "apptainer", "pyxis", "charliecloud"], Meta(
        description="none: on the node itself; apptainer: inside `apptainer exec IMAGE`; pyxis: "
                    "`srun --container-image=IMAGE` (Slurm with the pyxis plugin); charliecloud: inside "
                    "`ch-run IMAGE`, a SquashFS image unpacked once per node into stage_dir")] = "none"
    image: Annotated[str | None, Meta(
        description="apptainer: an absolute .sif path or a URI (docker://...); pyxis: an enroot image "
                    "(nvcr.io#nvidia/pytorch:24.01-py3) or .sqsh path; charliecloud: an absolute .sqfs path "
                    "or image directory")] = None
    stage_dir: Annotated[str | None, Meta(
        description="charliecloud: node-local folder a SquashFS image is unpacked into, once per image; "
                    "default: $TMPDIR/hpclaunch-images, else /tmp/hpclaunch-images")] = None
    mounts: Annotated[tuple[str, ...], Meta(description="extra bind mounts SRC[:DST[:ro|rw]]; the run directory and "
                                                        "the asset store are always mounted")] = ()
    env: Annotated[EnvStrings, Meta(description="variables set inside the container")] = {}

    def __post_init__(self) -> None:
        rules.container_config(self)


class CheckpointDefaults(StrictModel, frozen=True, kw_only=True):
    """How this cluster's jobs save before their time limit (docs/troubleshooting.md#time-limits); a recipe's
    `checkpoint:` keys and `--set checkpoint.*` win."""

    lead_time: Annotated[int, Meta(ge=10, le=65535, description="seconds before the time limit that the scheduler "
                                   "signals USR1 (the backstop: the ranks save on their own before it when they "
                                   "know the job's end)")] = 120
    requeue: Annotated[bool, Meta(description="false where the site disables requeue: a job stopped by the time "
                                  "limit or preemption chains a follow-on job (--dependency=afterany) that "
                                  "resumes")] = True


class StorageDefaults(StrictModel, frozen=True, kw_only=True):
    """The run root's filesystem, as far as the checkpoints' timing needs it."""

    write_gbps: Annotated[float, Meta(gt=0, le=10000, description="GB/s one job writes its checkpoint at: the "
                                      "first save's time estimate (the plan's checkpoint size over it); later "
                                      "ones use the last measured write")] = 1.0


class RemoteConfig(StrictModel, frozen=True, kw_only=True):
    """The login node this profile's commands run on over SSH, from a laptop (docs/remote.md)."""

    host: Annotated[str, Meta(min_length=1, description="the login node's name or address")]
    user: Annotated[str | None, Meta(description="the user to log in as; default: ssh's (~/.ssh/config)")] = None
    port: Annotated[int, Meta(ge=1, le=65535, description="the SSH port")] = 22
    identity: Annotated[str | None, Meta(description="the private key file ssh logs in with; default: ssh's")] = None
    known_hosts: Annotated[str | None, Meta(description="the known_hosts file the login node's host key is checked "
                                            "against (never skipped); default: ~/.ssh/known_hosts")] = None


class ProfileDefaults(StrictModel, frozen=True, kw_only=True):
    layout: str | None = None
    time: SlurmTimeText | None = None
    memory_margin: Annotated[float, Meta(ge=0, lt=1, description="the share of a device's memory that "
                                         "train.micro_batch_size=auto leaves free (0.1: it plans within 90 %)")] = 0.1


class AgentBudget(StrictModel, frozen=True, kw_only=True):
    """How many jobs a coding agent (`hpclaunch mcp`) may hold in the queue on this profile at once."""

    max_pending: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(
        description="jobs of this profile waiting in the queue beyond which an agent's submit is refused; null: "
                    "no limit")] = None
    max_running: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(
        description="jobs of this profile running at once beyond which an agent's submit is refused; null: "
                    "no limit")] = None


class Profile(StrictModel, frozen=True, kw_only=True):
    name: str
    description: str = ""
    scheduler: SchedulerName = "slurm"
    accelerator: Accelerator
    backend: Backend
    partitions: dict[str, Partition]
    default_partition: str
    account: str | None = None
    qos: str | None = None
    modules: Modules = Modules()
    python: PythonEnv = PythonEnv()
    python_envs: Annotated[dict[str, PythonEnv], Meta(
        description="named extra environments a recipe may ask for (recipe key python_env), e.g. mindspore")] = {}
    env: EnvStrings = {}
    assets: AssetConfig = AssetConfig()
    defaults: ProfileDefaults = ProfileDefaults()
    sbatch_extra: Annotated[dict[str, str | None], Meta(
        description="extra #SBATCH options: {exclusive: null, constraint: a100}")] = {}
    templates: Annotated[str | None, Meta(description="folder of template overrides, relative to the profile")] = None
    run_root: Annotated[str | None, Meta(description="where run directories go (a shared filesystem)")] = None
    watchdog: WatchdogDefaults = WatchdogDefaults()
    restarts: RestartDefaults = RestartDefaults()
    health: HealthDefaults = HealthDefaults()
    stragglers: StragglerDefaults = StragglerDefaults()
    collective_timeout: Annotated[float, Meta(gt=0, le=86400, description="seconds a collective may wait before the "
                                              "backend aborts it (process group timeout, NCCL/HCCL variables)")] = 600.0
    max_requeues_without_progress: Annotated[int, Meta(ge=1, le=1000, description="requeues (preemption, time "
                                                       "limit) in a row without a new checkpoint before the job stops "
                                                       "requeueing")] = 3
    container: ContainerConfig = ContainerConfig()
    tracking: Annotated[TrackingSpec, Meta(description="the site's tracker defaults, e.g. "
                                           "{wandb: {entity: my-team, mode: offline}}; a recipe's keys win")
                        ] = TrackingSpec()
    checkpoint: CheckpointDefaults = CheckpointDefaults()
    notify: Annotated[NotifySpec, Meta(description="word when a job ends: a webhook, a command, the scheduler's "
                                       "mail (docs/profiles.md#word-when-a-job-ends); a recipe's keys win")
                      ] = NotifySpec()
    storage: StorageDefaults = StorageDefaults()
    suspect_node_hours: Annotated[float, Meta(gt=0, description="how long a node blamed for a failure is excluded")
                                  ] = 24.0
    agents: Annotated[AgentBudget, Meta(description="the queue budget of a coding agent's submits (hpclaunch mcp), "
                                        "e.g. {max_pending: 2, max_running: 4}")] = AgentBudget()
    remote: Annotated[RemoteConfig | None, Meta(description="submit from a laptop: the login node its commands run "
                                                "on over SSH (docs/remote.md)")] = None
    node_scratch: Annotated[str | None, Meta(description="node-local disk for staged environments and assets (the "
                                             "node's host name is added); default: $TMPDIR, else /tmp, "
                                             "/hpclaunch-$USER")] = None
    node_scratch_keep_days: Annotated[float, Meta(gt=0, description="a node-local copy (environment, asset, "
                                                  "checkpoint, image) unused this long is removed when the node "
                                                  "stages another beside it")] = 3.0
    node_broadcast: Annotated[bool, Meta(description="the packed python environment reaches the nodes that lack it "
                                         "by the scheduler's broadcast (Slurm: srun --bcast), read once from the "
                                         "store whatever the node count; false: each node copies it from the store "
                                         "(docs/fast-start.md#one-read-whatever-the-node-count)")] = True

    topology: Annotated[TopologyConfig, Meta(description="the network's leaf switches or blocks, read at submit or "
                                             "given here, and how a job is placed on them "
                                             "(docs/profiles.md#network-topology)")] = TopologyConfig()

    def __post_init__(self) -> None:
        rules.consistent_profile(self)

    def python_env_for(self, name: str | None) -> PythonEnv:
        if name is None:
            return self.python
        if name not in self.python_envs:
            known = ", ".join(sorted(self.python_envs)) or "none"
            raise ValueError(f"the recipe needs python environment {name!r}, which profile "
                             f"{self.name!r} does not define under python_envs (defined: {known})")
        return self.python_envs[name]

    @property
    def visible_devices_var(self) -> str | None:
        return VISIBLE_DEVICES_VAR[self.accelerator]




def asset_store(profile: Profile) -> str:
    """The profile's asset store as written (``~`` and ``$VARS`` are expanded where it is read): its
    ``assets.store``; else, for a cluster profile, the site's scratch (``$SCRATCH/hpclaunch/assets``, see
    core.paths.scratch_root) where the login node sets one; else ``~/.hpclaunch/assets``. The job gets the
    path chosen at submit (``HPCLAUNCH_ASSET_STORE`` and its resolved.yaml)."""
    if profile.assets.store:
        return profile.assets.store
    from hpclaunch.core.paths import scratch_root

    scratch = scratch_root()
    if scratch is not None and can(profile.scheduler, "site_scratch"):
        return str(scratch / "assets")
    return "~/.hpclaunch/assets"
