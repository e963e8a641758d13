"""Recipes: what to train (model, tokenizer, dataset), how (launcher, hyper-parameters) and presets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from hpclaunch.backends import LAUNCHER_NAMES
from hpclaunch.config import rules
from hpclaunch.config.base import SlurmTimeText, StrictModel

if TYPE_CHECKING:
    Launcher = str
else:
    Launcher = Literal[LAUNCHER_NAMES]  # the names in hpclaunch/backends.py


class ModelSpec(StrictModel):
    repo: str | None = Field(None, description="hub repo id, e.g. gpt2; staged into the asset store")
    revision: str = "main"
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
    revision: str = "main"
    source: Literal["hub", "train"] = Field("hub", description="train: a tokenizer trained locally on the corpus")
    kind: Literal["bpe", "wordpiece"] = "bpe"
    vocab_size: int = 1024


class DatasetSpec(StrictModel):
    repo: str | None = None
    name: str | None = Field(None, description="the dataset config, e.g. wikitext-103-raw-v1")
    revision: str = "main"
    source: Literal["hub", "builtin"] = Field(
        "hub", description="builtin: a small public-domain corpus that ships with a Python package")
    corpus: str | None = Field(None, description="builtin corpus name, e.g. shakespeare")
    text_column: str = "text"
    train_split: str = "train"
    eval_split: str | None = "validation"

    @model_validator(mode="after")
    def _source(self) -> DatasetSpec:
        rules.dataset_source(self)
        return self


class TrainSpec(StrictModel):
    micro_batch_size: int = Field(8, ge=1)
    grad_accum: int | None = Field(None, ge=1)
    global_batch_size: int | None = Field(None, ge=1)
    seq_len: int = Field(128, ge=1)
    lr: float = Field(3e-4, gt=0)
    min_lr: float = Field(0.0, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    adam_betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW betas (GPT-2 and seed 003: 0.9, 0.95)")
    adam_eps: float = Field(1e-8, gt=0)
    warmup_steps: int = Field(0, ge=0)
    max_steps: int = Field(100, ge=1)
    grad_clip: float | None = Field(1.0, gt=0)
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    seed: int = 1234
    dropout: float | None = Field(None, ge=0, le=1, description="set every dropout of the model; 0 for parity runs")
    activation_checkpointing: bool = False
    compile: bool = False
    log_every: int = Field(10, ge=1)
    eval_every: int = Field(0, ge=0, description="0: eval only at the end")
    eval_steps: int = Field(10, ge=0)
    save_every: int = Field(0, ge=0, description="0: checkpoint only at the end")
    mlm_probability: float = Field(0.15, gt=0, lt=1)
    num_workers: int = Field(0, ge=0)
    threads_per_rank: int | None = Field(None, ge=1, description="torch threads per rank on CPU")


class DeepSpeedSpec(StrictModel):
    zero_stage: int = Field(2, ge=0, le=3)
    offload_optimizer: bool = False
    offload_param: bool = False
    leaf_modules: tuple[str, ...] = Field((), description="module class names kept whole under ZeRO-3 (MoE blocks)")
    config: dict[str, Any] = Field({}, description="raw ds_config.json keys merged over the generated ones")


class ParallelSpec(StrictModel):
    """MindSpore's parallel config (seed 004)."""

    data_parallel: int | None = Field(None, ge=1, description="default: devices / (model_parallel x pipeline_stage)")
    model_parallel: int = Field(1, ge=1)
    pipeline_stage: int = Field(1, ge=1)
    micro_batch_num: int = Field(1, ge=1)
    optimizer_shard: bool = False
    recompute: bool = False
    vocab_emb_dp: bool = True


class MsrunSpec(StrictModel):
    cluster_time_out: int = Field(600, ge=1)
    master_port: int | None = Field(None, ge=1024, le=65535, description="default: derived from the job id")


class WatchdogSpec(StrictModel):
    """The hang watchdog for this recipe; unset keys take the profile's watchdog settings."""

    enabled: bool | None = None
    timeout: float | None = Field(None, gt=0, le=14 * 86400,
                                  description="seconds without progress before the job is ended as hung (fixed)")
    init_timeout: float | None = Field(None, gt=0, le=14 * 86400, description="seconds allowed before the first step")


class Recipe(StrictModel):
    name: str
    description: str = ""
    script: str = Field(description="the training script, relative to the recipe folder")
    launcher: Launcher
    task: Literal["causal-lm", "masked-lm", "test"] = "causal-lm"
    model: ModelSpec | None = None
    tokenizer: TokenizerSpec | None = None
    dataset: DatasetSpec | None = None
    layout: str | None = Field(None, description="default layout, e.g. 1n8g")
    partition: str | None = None
    time: SlurmTimeText | None = None
    train: TrainSpec = TrainSpec()
    deepspeed: DeepSpeedSpec | None = None
    parallel: ParallelSpec | None = None
    msrun: MsrunSpec | None = None
    watchdog: WatchdogSpec = WatchdogSpec()
    args: tuple[str, ...] = Field((), description="extra arguments for the script (`submit ... -- ARGS` replaces them)")
    adhoc: bool = Field(False, description="made by `hpclaunch submit SCRIPT.py`: the run directory keeps a copy of "
                                           "the script alone, which gets only `args` (its config is in "
                                           "$HPCLAUNCH_CONFIG, not in a --config argument)")
    env: dict[str, str] = {}
    python_env: str | None = Field(None, description="a named environment the profile must provide (e.g. mindspore)")

    @model_validator(mode="after")
    def _launcher_sections(self) -> Recipe:
        rules.launcher_sections(self)
        return self
