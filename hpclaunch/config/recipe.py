"""Recipes: what to train (model, tokenizer, dataset), how (launcher, hyper-parameters) and presets."""

from typing import TYPE_CHECKING, Annotated, Any, Literal

from hpclaunch.config import rules
from hpclaunch.config.base import Meta, SlurmTimeText, StrictModel
from hpclaunch.config.notify import NotifySpec
from hpclaunch.config.topology import TopologySpec
from hpclaunch.config.tracking import TrackingSpec
from hpclaunch.core.backends import LAUNCHER_NAMES

if TYPE_CHECKING:
    Launcher = str
else:
    Launcher = Literal[LAUNCHER_NAMES]  # the names in hpclaunch/core/backends.py


class ModelSpec(StrictModel, frozen=True, kw_only=True):
    repo: Annotated[str | None, Meta(description="hub repo id, e.g. gpt2; staged into the asset store")] = None
    revision: Annotated[str, Meta(description="hub revision (branch, tag or commit) of the model")] = "main"
    source: Annotated[
        Literal["hub", "generate"],
        Meta(description="hub: staged weights; generate: built from `config` (random init, no network)"),
    ] = "hub"
    model_type: Annotated[str | None, Meta(description="transformers model type for source: generate")] = None
    config: Annotated[dict[str, Any], Meta(description="model config keys (generate) or overrides (hub)")] = {}
    override_config: Annotated[
        str | None, Meta(description="override_config.json (seed 000), relative to the recipe")
    ] = None

    def __post_init__(self) -> None:
        rules.model_source(self)


class TokenizerSpec(StrictModel, frozen=True, kw_only=True):
    repo: Annotated[str | None, Meta(description="hub repo id; default: the model's repo")] = None
    revision: Annotated[str, Meta(description="hub revision of the tokenizer")] = "main"
    source: Annotated[Literal["hub", "train"], Meta(description="train: a tokenizer trained locally on the corpus")] = (
        "hub"
    )
    kind: Annotated[
        Literal["bpe", "wordpiece"], Meta(description="the kind of tokenizer trained for source: train")
    ] = "bpe"
    vocab_size: Annotated[int, Meta(description="vocabulary size of a trained tokenizer")] = 1024


class DatasetSpec(StrictModel, frozen=True, kw_only=True):
    repo: Annotated[str | None, Meta(description="hub dataset id, e.g. wikitext")] = None
    name: Annotated[str | None, Meta(description="the dataset config, e.g. wikitext-103-raw-v1")] = None
    revision: Annotated[str, Meta(description="hub revision of the dataset")] = "main"
    source: Annotated[
        Literal["hub", "builtin"],
        Meta(description="builtin: a small public-domain corpus that ships with a Python package"),
    ] = "hub"
    corpus: Annotated[str | None, Meta(description="builtin corpus name, e.g. shakespeare")] = None
    text_column: Annotated[str, Meta(description="the column that holds the text")] = "text"
    train_split: Annotated[str, Meta(description="the split trained on")] = "train"
    eval_split: Annotated[str | None, Meta(description="the split evaluated on (null: no eval)")] = "validation"

    def __post_init__(self) -> None:
        rules.dataset_source(self)


class TrainSpec(StrictModel, frozen=True, kw_only=True):
    micro_batch_size: Annotated[int, Meta(ge=1, description="samples per rank per forward pass")] = 8
    grad_accum: Annotated[
        Annotated[int, Meta(ge=1)] | None,
        Meta(description="micro-batches per optimizer step (default: from global_batch_size, else 1)"),
    ] = None
    global_batch_size: Annotated[
        Annotated[int, Meta(ge=1)] | None, Meta(description="micro_batch_size x grad_accum x data-parallel size")
    ] = None
    seq_len: Annotated[int, Meta(ge=1, description="tokens per sample")] = 128
    lr: Annotated[float, Meta(gt=0, description="peak learning rate")] = 3e-4
    min_lr: Annotated[float, Meta(ge=0, description="learning rate at the end of the cosine decay")] = 0.0
    weight_decay: Annotated[float, Meta(ge=0, description="AdamW weight decay")] = 0.0
    adam_betas: Annotated[tuple[float, float], Meta(description="AdamW betas (GPT-2 and seed 003: 0.9, 0.95)")] = (
        0.9,
        0.95,
    )
    adam_eps: Annotated[float, Meta(gt=0, description="AdamW epsilon")] = 1e-8
    warmup_steps: Annotated[int, Meta(ge=0, description="linear warm-up steps before the decay")] = 0
    max_steps: Annotated[int, Meta(ge=1, description="optimizer steps to train")] = 100
    grad_clip: Annotated[
        Annotated[float, Meta(gt=0)] | None, Meta(description="clip the gradient norm to this (null: no clipping)")
    ] = 1.0
    precision: Annotated[
        Literal["auto", "bf16", "fp16", "fp32"],
        Meta(description="auto: bf16 where supported, fp16 on V100, fp32 on CPU"),
    ] = "auto"
    deterministic: Annotated[bool, Meta(description="deterministic kernels, no TF32 (the parity presets)")] = False
    seed: Annotated[int, Meta(description="random seed (the same on every rank)")] = 1234
    dropout: Annotated[
        Annotated[float, Meta(ge=0, le=1)] | None, Meta(description="set every dropout of the model; 0 for parity runs")
    ] = None
    activation_checkpointing: Annotated[bool, Meta(description="recompute activations in backward (less memory)")] = (
        False
    )
    compile: Annotated[bool, Meta(description="torch.compile the model")] = False
    compile_mode: Annotated[
        Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
        Meta(description="torch.compile's mode (reduce-overhead: CUDA graphs; max-autotune: searched kernels)"),
    ] = "default"
    model_code: Annotated[
        Literal["auto", "transformers"],
        Meta(description="auto: GPT-2 trains on hpclaunch's torch-only copy of transformers' model (same weights and "
                         "loss, a faster rank start); transformers: always transformers' model classes"),
    ] = "auto"
    grad_sync: Annotated[
        Literal["auto", "ddp", "hooks"],
        Meta(description="data-parallel gradients (torch engine): auto = ddp when compiling, else hooks; ddp: torch's "
                         "DistributedDataParallel; hooks: hpclaunch's bucketed all-reduce (no torch._dynamo import)"),
    ] = "auto"
    log_every: Annotated[int, Meta(ge=1, description="steps between metric records")] = 10
    eval_every: Annotated[int, Meta(ge=0, description="0: eval only at the end")] = 0
    eval_steps: Annotated[int, Meta(ge=0, description="batches per evaluation")] = 10
    save_every: Annotated[int, Meta(ge=0, description="0: checkpoint only at the end")] = 0
    peer_snapshot_every: Annotated[int, Meta(ge=0, description=(
        "steps between in-memory snapshots of the training state on each node, from which a relaunch inside the "
        "allocation takes the state of a surviving data-parallel peer instead of the newest checkpoint (torch "
        "engine; under DeepSpeed ZeRO-1/2 each rank's own partition; data parallelism >= 2, restarts.max > 0); 0: "
        "off (docs/troubleshooting.md#recovery-from-a-peer)"))
                                   ] = 1
    mlm_probability: Annotated[float, Meta(gt=0, lt=1, description="share of tokens masked (task: masked-lm)")] = 0.15
    num_workers: Annotated[int, Meta(ge=0, description="DataLoader worker processes per rank")] = 0
    threads_per_rank: Annotated[
        Annotated[int, Meta(ge=1)] | None, Meta(description="torch threads per rank on CPU")
    ] = None


class DeepSpeedSpec(StrictModel, frozen=True, kw_only=True):
    zero_stage: Annotated[int, Meta(ge=0, le=3, description="ZeRO stage 0-3")] = 2
    offload_optimizer: Annotated[bool, Meta(description="keep the optimizer state in CPU memory")] = False
    offload_param: Annotated[bool, Meta(description="keep the parameters in CPU memory (ZeRO-3)")] = False
    leaf_modules: Annotated[
        tuple[str, ...], Meta(description="module class names kept whole under ZeRO-3 (MoE blocks)")
    ] = ()
    config: Annotated[dict[str, Any], Meta(description="raw ds_config.json keys merged over the generated ones")] = {}

    def __post_init__(self) -> None:
        rules.zero_offload(self)


class ParallelSpec(StrictModel, frozen=True, kw_only=True):
    """How a model replica is split: MindSpore's parallel config (seed 004) under msrun; tensor x data parallel
    (model_parallel ranks per replica, hpclaunch/runtime/train/tensor_parallel.py) under torchrun."""

    data_parallel: Annotated[
        Annotated[int, Meta(ge=1)] | None, Meta(description="default: devices / (model_parallel x pipeline_stage)")
    ] = None
    model_parallel: Annotated[int, Meta(ge=1, description="tensor-parallel degree")] = 1
    pipeline_stage: Annotated[int, Meta(ge=1, description="pipeline stages")] = 1
    micro_batch_num: Annotated[int, Meta(ge=1, description="micro-batches per pipeline step")] = 1
    optimizer_shard: Annotated[bool, Meta(description="shard the optimizer state across data-parallel ranks")] = False
    recompute: Annotated[bool, Meta(description="recompute activations in the backward pass")] = False
    vocab_emb_dp: Annotated[bool, Meta(description="the vocabulary embedding data-parallel (not model-parallel)")] = (
        True
    )
    implemented: Annotated[
        tuple[Literal["data", "model", "pipeline", "optimizer_shard"], ...],
        Meta(
            description="what the recipe's script implements; model_parallel or pipeline_stage above 1, "
            "or optimizer_shard, is refused before queueing unless listed here"
        ),
    ] = ("data",)


class MsrunSpec(StrictModel, frozen=True, kw_only=True):
    cluster_time_out: Annotated[int, Meta(ge=1, description="seconds msrun waits for every node to join")] = 600
    master_port: Annotated[
        Annotated[int, Meta(ge=1024, le=65535)] | None, Meta(description="default: derived from the job id")
    ] = None


class WatchdogSpec(StrictModel, frozen=True, kw_only=True):
    """The hang watchdog for this recipe; unset keys take the profile's watchdog settings."""

    enabled: Annotated[bool | None, Meta(description="turn the hang watchdog on or off (default: the profile's)")] = (
        None
    )
    timeout: Annotated[
        Annotated[float, Meta(gt=0, le=14 * 86400)] | None,
        Meta(description="seconds without progress before the job is ended as hung (fixed)"),
    ] = None
    init_timeout: Annotated[
        Annotated[float, Meta(gt=0, le=14 * 86400)] | None, Meta(description="seconds allowed before the first step")
    ] = None


class RestartsSpec(StrictModel, frozen=True, kw_only=True):
    """Relaunches inside the allocation; unset: the profile's restarts.max."""

    max: Annotated[Annotated[int, Meta(ge=0, le=100)] | None, Meta(
        description="relaunches of the training step in the same allocation after a fault a restart can fix "
                    "(--set restarts.max=N; 0: none)")] = None


class HealthSpec(StrictModel, frozen=True, kw_only=True):
    """Node health before step 0 for this job; unset keys take the profile's health settings."""

    enabled: Annotated[bool | None, Meta(description="check every node before the launch (default: the profile's)")
                       ] = None
    min_free_gib: Annotated[Annotated[float, Meta(ge=0)] | None, Meta(
        description="GiB that must be free on the run directory's filesystem and node-local scratch")] = None
    min_allreduce_gbps: Annotated[Annotated[float, Meta(ge=0)] | None, Meta(
        description="the least bandwidth of each node's links to its ceil(log2 N) partners (their median), GB/s "
                    "(0: measured only)")] = None


class PythonSpec(StrictModel, frozen=True, kw_only=True):
    """Where the ranks' Python environment runs from; unset: the profile's python.stage."""

    stage: Annotated[Literal["auto", "shared", "node-local"] | None, Meta(
        description="node-local: from a copy on each node's local scratch (docs/fast-start.md); auto: node-local "
                    "for a job of several nodes not in a container")] = None
    stage_fallback: Annotated[Literal["fail", "shared"] | None, Meta(
        description="when a node cannot stage the environment: fail (end the job) or shared (run every node from "
                    "the shared environment); unset: the profile's python.stage_fallback")] = None


class ResourcesSpec(StrictModel, frozen=True, kw_only=True):
    """What each node's task asks beside its devices; unset keys take the devices' share of the node."""

    cpus_per_task: Annotated[
        Annotated[int, Meta(ge=1)] | None,
        Meta(
            description="CPUs per node (one task per node); default: the "
            "node's cpus_per_node x devices asked / devices per node (floor, at least 1)"
        ),
    ] = None
    mem_per_device: Annotated[
        str | None,
        Meta(
            extra={"before": rules.memory_size},
            description="memory per device, e.g. 64G (K, M, G or T; M without a "
            "unit), asked x devices per node; default: the same share of the node's "
            "memory_gb, all of it on a whole node"
        ),
    ] = None


class CheckpointSpec(StrictModel, frozen=True, kw_only=True):
    """Whether the script resumes: it decides whether a job stopped by preemption or the time limit requeues."""

    resumable: Annotated[
        bool | None,
        Meta(
            description="the script saves a checkpoint on SIGUSR1 and resumes from "
            "the newest when it starts again: a stopped job requeues itself; default: true "
            "for a recipe folder, false for your own script (submit SCRIPT.py)"
        ),
    ] = None
    lead_time: Annotated[
        Annotated[int, Meta(ge=10, le=65535)] | None,
        Meta(description="seconds before the time limit that the scheduler signals USR1 (default: the profile's)"),
    ] = None
    requeue: Annotated[
        bool | None,
        Meta(description="false: a stopped job chains a follow-on job that resumes instead of requeueing itself "
             "(default: the profile's)"),
    ] = None


class LaunchSpec(StrictModel, frozen=True, kw_only=True):
    """How each node starts its ranks (launcher torchrun)."""

    agent: Annotated[Literal["auto", "torchrun", "none"], Meta(
        description="none: the node supervisor starts the ranks itself (no agent importing torch; a fixed world, "
                    "the same environment); torchrun: torchrun's agent per node starts them; auto (the default): "
                    "none wherever the launcher is torchrun (--set launch.agent=torchrun keeps the agent)"
    )] = "auto"


class Recipe(StrictModel, frozen=True, kw_only=True):
    name: Annotated[str, Meta(description="the recipe's name (default: its folder's name; the job name unless --name)")]
    description: Annotated[str, Meta(description="one line for `hpclaunch recipes list`")] = ""
    script: Annotated[str, Meta(description="the training script, relative to the recipe folder")]
    launcher: Annotated[Launcher, Meta(description="what starts the ranks on each node: torchrun, deepspeed or msrun")]
    launchers: Annotated[
        tuple[Launcher, ...],
        Meta(description="the launchers the script runs under (e.g. [deepspeed, torchrun]): a launcher outside "
                         "them is refused before queueing (empty: not declared)"),
    ] = ()
    task: Annotated[
        Literal["causal-lm", "masked-lm", "test"],
        Meta(description="causal-lm, masked-lm, or test (the script does it all)"),
    ] = "causal-lm"
    model: Annotated[ModelSpec | None, Meta(description="the model to train")] = None
    tokenizer: Annotated[TokenizerSpec | None, Meta(description="the tokenizer (default: the model's)")] = None
    dataset: Annotated[DatasetSpec | None, Meta(description="the training data")] = None
    layout: Annotated[str | None, Meta(description="default layout, e.g. 1n8g")] = None
    partition: Annotated[str | None, Meta(description="default: the profile's default_partition")] = None
    time: Annotated[SlurmTimeText | None, Meta(description="time limit, e.g. 04:00:00 (default: the profile's)")] = None
    train: Annotated[TrainSpec, Meta(description="hyper-parameters")] = TrainSpec()
    deepspeed: Annotated[DeepSpeedSpec | None, Meta(description="DeepSpeed settings (launcher: deepspeed)")] = None
    parallel: Annotated[
        ParallelSpec | None, Meta(description="MindSpore's parallel (msrun); tensor x data (torchrun)")
    ] = None
    msrun: Annotated[MsrunSpec | None, Meta(description="msrun settings (launcher: msrun)")] = None
    launch: Annotated[LaunchSpec, Meta(description="how each node starts its ranks (launcher torchrun)")] = (
        LaunchSpec()
    )
    watchdog: Annotated[WatchdogSpec, Meta(description="the hang watchdog, over the profile's settings")] = (
        WatchdogSpec()
    )
    restarts: Annotated[RestartsSpec, Meta(description="relaunches inside the allocation, over the profile's")] = (
        RestartsSpec()
    )
    health: Annotated[HealthSpec, Meta(description="node health before step 0, over the profile's settings")] = (
        HealthSpec()
    )
    python: Annotated[PythonSpec, Meta(description="the ranks' Python environment, over the profile's")] = (
        PythonSpec()
    )
    tracking: Annotated[TrackingSpec, Meta(description="experiment trackers (W&B), over the profile's")] = (
        TrackingSpec()
    )
    resources: Annotated[
        ResourcesSpec,
        Meta(description="CPUs and memory per node (default: the share of the node that the devices asked are)"),
    ] = ResourcesSpec()
    checkpoint: Annotated[
        CheckpointSpec,
        Meta(description="whether the script resumes from its checkpoints (a stopped job requeues only then)"),
    ] = CheckpointSpec()
    topology: Annotated[TopologySpec, Meta(description="the job's placement on the network (topology.placement), "
                                           "over the profile's")] = TopologySpec()
    notify: Annotated[NotifySpec, Meta(description="word when the job ends (webhook, command, mail), over the "
                                       "profile's (submit --notify URL|COMMAND over both)")] = NotifySpec()
    args: Annotated[
        tuple[str, ...], Meta(description="extra arguments for the script (`submit ... -- ARGS` replaces them)")
    ] = ()
    adhoc: Annotated[
        bool,
        Meta(
            description="made by `hpclaunch submit SCRIPT.py`: the run directory keeps a copy of "
            "the script's folder, where the ranks run; the script gets only `args` (its config is in "
            "$HPCLAUNCH_CONFIG, not in a --config argument)"
        ),
    ] = False
    env: Annotated[dict[str, str], Meta(description="environment variables for the job")] = {}
    python_env: Annotated[
        str | None, Meta(description="a named environment the profile must provide (e.g. mindspore)")
    ] = None

    def __post_init__(self) -> None:
        rules.launcher_sections(self)

    @property
    def agentless(self) -> bool:
        """The node supervisor starts the ranks (launch.agent none, or auto under launcher torchrun): no torchrun
        agent per node. Its crash, hang, kill, lost-node and exit-code handling is tested as torchrun's is
        (tests/integration/test_agentless.py, and every torchrun job of the suite runs this way by default)."""
        return self.launcher == "torchrun" and self.launch.agent != "torchrun"
