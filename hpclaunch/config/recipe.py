"""Recipes: what to train (model, tokenizer, dataset), how (launcher, hyper-parameters) and presets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from hpclaunch.config import rules
from hpclaunch.config.base import SlurmTimeText, StrictModel
from hpclaunch.config.tracking import TrackingSpec
from hpclaunch.core.backends import LAUNCHER_NAMES

if TYPE_CHECKING:
    Launcher = str
else:
    Launcher = Literal[LAUNCHER_NAMES]  # the names in hpclaunch/core/backends.py


class ModelSpec(StrictModel):
    repo: str | None = Field(None, description="hub repo id, e.g. gpt2; staged into the asset store")
    revision: str = Field("main", description="hub revision (branch, tag or commit) of the model")
    source: Literal["hub", "generate"] = Field(
        "hub", description="hub: staged weights; generate: built from `config` (random init, no network)")
    model_type: str | None = Field(None, description="transformers model type for source: generate")
    config: dict[str, Any] = Field({}, description="model config keys (generate) or overrides (hub)")
    override_config: str | None = Field(None, description="override_config.json (seed 000), relative to the recipe")

    @model_validator(mode="after")
    def _source(self) -> ModelSpec:
        rules.model_source(self)
        return self


class TokenizerSpec(StrictModel):
    repo: str | None = Field(None, description="hub repo id; default: the model's repo")
    revision: str = Field("main", description="hub revision of the tokenizer")
    source: Literal["hub", "train"] = Field("hub", description="train: a tokenizer trained locally on the corpus")
    kind: Literal["bpe", "wordpiece"] = Field("bpe", description="the kind of tokenizer trained for source: train")
    vocab_size: int = Field(1024, description="vocabulary size of a trained tokenizer")


class DatasetSpec(StrictModel):
    repo: str | None = Field(None, description="hub dataset id, e.g. wikitext")
    name: str | None = Field(None, description="the dataset config, e.g. wikitext-103-raw-v1")
    revision: str = Field("main", description="hub revision of the dataset")
    source: Literal["hub", "builtin"] = Field(
        "hub", description="builtin: a small public-domain corpus that ships with a Python package")
    corpus: str | None = Field(None, description="builtin corpus name, e.g. shakespeare")
    text_column: str = Field("text", description="the column that holds the text")
    train_split: str = Field("train", description="the split trained on")
    eval_split: str | None = Field("validation", description="the split evaluated on (null: no eval)")

    @model_validator(mode="after")
    def _source(self) -> DatasetSpec:
        rules.dataset_source(self)
        return self


class TrainSpec(StrictModel):
    micro_batch_size: int = Field(8, ge=1, description="samples per rank per forward pass")
    grad_accum: int | None = Field(
        None, ge=1, description="micro-batches per optimizer step (default: from global_batch_size, else 1)")
    global_batch_size: int | None = Field(None, ge=1, description="micro_batch_size x grad_accum x data-parallel size")
    seq_len: int = Field(128, ge=1, description="tokens per sample")
    lr: float = Field(3e-4, gt=0, description="peak learning rate")
    min_lr: float = Field(0.0, ge=0, description="learning rate at the end of the cosine decay")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    adam_betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW betas (GPT-2 and seed 003: 0.9, 0.95)")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon")
    warmup_steps: int = Field(0, ge=0, description="linear warm-up steps before the decay")
    max_steps: int = Field(100, ge=1, description="optimizer steps to train")
    grad_clip: float | None = Field(1.0, gt=0, description="clip the gradient norm to this (null: no clipping)")
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field("auto",
        description="auto: bf16 where supported, fp16 on V100, fp32 on CPU")
    deterministic: bool = Field(False, description="deterministic kernels, no TF32 (the parity presets)")
    seed: int = Field(1234, description="random seed (the same on every rank)")
    dropout: float | None = Field(None, ge=0, le=1, description="set every dropout of the model; 0 for parity runs")
    activation_checkpointing: bool = Field(False, description="recompute activations in backward (less memory)")
    compile: bool = Field(False, description="torch.compile the model")
    log_every: int = Field(10, ge=1, description="steps between metric records")
    eval_every: int = Field(0, ge=0, description="0: eval only at the end")
    eval_steps: int = Field(10, ge=0, description="batches per evaluation")
    save_every: int = Field(0, ge=0, description="0: checkpoint only at the end")
    mlm_probability: float = Field(0.15, gt=0, lt=1, description="share of tokens masked (task: masked-lm)")
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes per rank")
    threads_per_rank: int | None = Field(None, ge=1, description="torch threads per rank on CPU")


class DeepSpeedSpec(StrictModel):
    zero_stage: int = Field(2, ge=0, le=3, description="ZeRO stage 0-3")
    offload_optimizer: bool = Field(False, description="keep the optimizer state in CPU memory")
    offload_param: bool = Field(False, description="keep the parameters in CPU memory (ZeRO-3)")
    leaf_modules: tuple[str, ...] = Field((), description="module class names kept whole under ZeRO-3 (MoE blocks)")
    config: dict[str, Any] = Field({}, description="raw ds_config.json keys merged over the generated ones")


class ParallelSpec(StrictModel):
    """How a model replica is split: MindSpore's parallel config (seed 004) under msrun; tensor x data parallel
    (model_parallel ranks per replica, hpclaunch/runtime/train/tensor_parallel.py) under torchrun."""

    data_parallel: int | None = Field(None, ge=1, description="default: devices / (model_parallel x pipeline_stage)")
    model_parallel: int = Field(1, ge=1, description="tensor-parallel degree")
    pipeline_stage: int = Field(1, ge=1, description="pipeline stages")
    micro_batch_num: int = Field(1, ge=1, description="micro-batches per pipeline step")
    optimizer_shard: bool = Field(False, description="shard the optimizer state across data-parallel ranks")
    recompute: bool = Field(False, description="recompute activations in the backward pass")
    vocab_emb_dp: bool = Field(True, description="the vocabulary embedding data-parallel (not model-parallel)")
    implemented: tuple[Literal["data", "model", "pipeline", "optimizer_shard"], ...] = Field(
        ("data",), description="what the recipe's script implements; model_parallel or pipeline_stage above 1, "
                               "or optimizer_shard, is refused before queueing unless listed here")


class MsrunSpec(StrictModel):
    cluster_time_out: int = Field(600, ge=1, description="seconds msrun waits for every node to join")
    master_port: int | None = Field(None, ge=1024, le=65535, description="default: derived from the job id")


class WatchdogSpec(StrictModel):
    """The hang watchdog for this recipe; unset keys take the profile's watchdog settings."""

    enabled: bool | None = Field(None, description="turn the hang watchdog on or off (default: the profile's)")
    timeout: float | None = Field(None, gt=0, le=14 * 86400,
                                  description="seconds without progress before the job is ended as hung (fixed)")
    init_timeout: float | None = Field(None, gt=0, le=14 * 86400, description="seconds allowed before the first step")


class ResourcesSpec(StrictModel):
    """What each node's task asks beside its devices; unset keys take the devices' share of the node."""

    cpus_per_task: int | None = Field(None, ge=1, description="CPUs per node (one task per node); default: the "
                                      "node's cpus_per_node x devices asked / devices per node (floor, at least 1)")
    mem_per_device: str | None = Field(None, description="memory per device, e.g. 64G (K, M, G or T; M without a "
                                       "unit), asked x devices per node; default: the same share of the node's "
                                       "memory_gb, all of it on a whole node")

    @field_validator("mem_per_device", mode="before")
    @classmethod
    def _size(cls, v: object) -> object:
        return rules.memory_size(v)


class CheckpointSpec(StrictModel):
    """Whether the script resumes: it decides whether a job stopped by preemption or the time limit requeues."""

    resumable: bool | None = Field(None, description="the script saves a checkpoint on SIGUSR1 and resumes from "
                                   "the newest when it starts again: a stopped job requeues itself; default: true "
                                   "for a recipe folder, false for your own script (submit SCRIPT.py)")


class Recipe(StrictModel):
    name: str = Field(description="the recipe's name (default: its folder's name; the job name unless --name)")
    description: str = Field("", description="one line for `hpclaunch recipes list`")
    script: str = Field(description="the training script, relative to the recipe folder")
    launcher: Launcher = Field(description="what starts the ranks on each node: torchrun, deepspeed or msrun")
    task: Literal["causal-lm", "masked-lm", "test"] = Field("causal-lm",
        description="causal-lm, masked-lm, or test (the script does it all)")
    model: ModelSpec | None = Field(None, description="the model to train")
    tokenizer: TokenizerSpec | None = Field(None, description="the tokenizer (default: the model's)")
    dataset: DatasetSpec | None = Field(None, description="the training data")
    layout: str | None = Field(None, description="default layout, e.g. 1n8g")
    partition: str | None = Field(None, description="default: the profile's default_partition")
    time: SlurmTimeText | None = Field(None, description="time limit, e.g. 04:00:00 (default: the profile's)")
    train: TrainSpec = Field(TrainSpec(), description="hyper-parameters")
    deepspeed: DeepSpeedSpec | None = Field(None, description="DeepSpeed settings (launcher: deepspeed)")
    parallel: ParallelSpec | None = Field(None, description="MindSpore's parallel (msrun); tensor x data (torchrun)")
    msrun: MsrunSpec | None = Field(None, description="msrun settings (launcher: msrun)")
    watchdog: WatchdogSpec = Field(WatchdogSpec(), description="the hang watchdog, over the profile's settings")
    tracking: TrackingSpec = Field(TrackingSpec(), description="experiment trackers (W&B), over the profile's")
    resources: ResourcesSpec = Field(ResourcesSpec(), description="CPUs and memory per node (default: the share "
                                     "of the node that the devices asked are)")
    checkpoint: CheckpointSpec = Field(CheckpointSpec(), description="whether the script resumes from its "
                                       "checkpoints (a stopped job requeues only then)")
    args: tuple[str, ...] = Field((), description="extra arguments for the script (`submit ... -- ARGS` replaces them)")
    adhoc: bool = Field(False, description="made by `hpclaunch submit SCRIPT.py`: the run directory keeps a copy of "
                                           "the script's folder, where the ranks run; the script gets only `args` "
                                           "(its config is in $HPCLAUNCH_CONFIG, not in a --config argument)")
    env: dict[str, str] = Field({}, description="environment variables for the job")
    python_env: str | None = Field(None, description="a named environment the profile must provide (e.g. mindspore)")

    @model_validator(mode="after")
    def _launcher_sections(self) -> Recipe:
        rules.launcher_sections(self)
        return self
