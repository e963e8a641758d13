"""Bytes per device of a training step: model states by ZeRO stage and offload, activations, communication
buffers and a runtime reserve. Pure arithmetic on two records, no torch: `ModelFacts` (what the model is,
from its config on the meta device: hpclaunch/plan/model.py) and `Setup` (how it trains, from the JobSpec).

Model states per parameter (AdamW: two fp32 moments, 8 bytes):

    engine               params       grads        optimizer                         total
    torch (DDP)          4 (fp32)     4 (fp32)     8 moments                         16   autocast computes in bf16/fp16
    DeepSpeed bf16/fp16  2            2            4 fp32 master + 8 moments = 12    16
    DeepSpeed fp32       4            4            8 moments (+ 4 fp32 copy at ZeRO-1/2) 16-20

ZeRO-1 divides the optimizer states by the data-parallel size (and the gradients when there is no
accumulation: DeepSpeed reduces each bucket into the rank's partition), ZeRO-2 the gradients too, ZeRO-3 the
parameters too. Offloading the optimizer moves the optimizer states and the gradients (as the fp32 partition
the host optimizer steps with) to the host; offloading the parameters (ZeRO-3) moves the 16-bit parameters too.

Activations per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", with SDPA/flash attention, so no s^2 score matrices): s x b x (34 h) bytes in 16-bit for GPT-2's
MLP (4h); here counted tensor by tensor, so gated MLPs (SwiGLU) and MoE (top-k experts per token) follow.
Activation checkpointing keeps each layer's input and recomputes one layer at a time. The logits are
counted in the activation precision plus the fp32 copy and log-softmax the loss keeps.

Tensor parallel (torch engine, transformers' tp_plan; hpclaunch/runtime/train/tensor_parallel.py) divides the
weights its plan splits (`ModelFacts.tp_params`: attention and expert projections, embeddings, LM head) and
their gradients and moments by `tensor_parallel`, and the activations inside attention and the MLP (q, k,
v, attention output, the intermediate-size tensors); each layer's input and norms stay whole on every rank
(no sequence parallelism), and so do the logits (the LM head gathers its output).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = float(1 << 30)
ADAM_MOMENTS = 8  # bytes per parameter: exp_avg and exp_avg_sq in fp32
# DeepSpeed's default bucket sizes (elements): reduce_bucket_size, allgather_bucket_size, stage3 prefetch
DS_BUCKET = 500_000_000
DS_PREFETCH = 50_000_000
# the runtime's own memory per device: CUDA/MUSA/CANN context, collective communicators, library workspaces;
# and the caching allocator's fragmentation as a share of the rest
RUNTIME_GIB = {"cpu": 0.5}
DEFAULT_RUNTIME_GIB = 1.0
FRAGMENTATION = 0.05
# tensors of the intermediate size an eager composite activation keeps for backward: gelu_new =
# 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) keeps pow, the inner sum, its scale, tanh and 1 + tanh
# (measured on an H100: GPT-2 124M, micro-batch 16, eager peaks 24.1 GiB, compiled 11.9 GiB; docs/benchmarks.md)
COMPOSITE_ACT_TENSORS = 5


@dataclass(frozen=True)
class ModelFacts:
    """What the memory plan needs to know of a model; read from its config built on the meta device."""

    params: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    experts: int = 1  # MoE: experts per layer
    top_k: int = 1  # MoE: experts each token goes through
    gated_mlp: bool = False  # SwiGLU (Llama, Mistral, Mixtral): gate and up projections
    composite_act: bool = False  # an activation written as several elementwise ops (GPT-2's gelu_new)
    largest_block: int = 0  # parameters of the largest layer or embedding (what ZeRO-3 gathers at once)
    model_type: str = ""
    tp_params: int = 0  # parameters the model's tensor-parallel plan splits (0: the model has no tp_plan)
    attention_scores: bool = False  # attention computed explicitly: the s x s scores and softmax are kept


@dataclass(frozen=True)
class Setup:
    """How the job trains: engine, ZeRO, precision, layout and batch."""

    engine: str  # "ddp" (torch; MindSpore's data parallel has the same states) or "deepspeed"
    zero_stage: int
    offload_optimizer: bool
    offload_param: bool
    precision: str  # bf16, fp16, fp32
    nodes: int
    gpus_per_node: int
    micro_batch: int
    grad_accum: int
    seq_len: int
    checkpointing: bool
    accelerator: str = "cuda"
    compiled: bool = False  # torch.compile: elementwise chains fused, their intermediates not kept
    tensor_parallel: int = 1  # ranks per model replica (parallel.model_parallel, torch engine)
    framework: str = "torch"  # or "mindspore" (recipes/gpt_mindspore: fp32 states, AdamWeightDecay)
    # hpclaunch's training forward (config/forwards.py): the logits of `logit_share` of the tokens, 16-bit
    fast_forward: bool = False
    logit_share: float = 1.0

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def dp_size(self) -> int:
        return self.world_size // self.tensor_parallel

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp_size

    @property
    def layout(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"


@dataclass(frozen=True)
class Estimate:
    """Bytes per device (and per node on the host, for offload)."""

    params: float
    grads: float
    optimizer: float
    activations: float
    buffers: float
    reserve: float
    host_per_node: float

    @property
    def model_states(self) -> float:
        return self.params + self.grads + self.optimizer

    @property
    def total(self) -> float:
        return self.model_states + self.activations + self.buffers + self.reserve


@dataclass(frozen=True)
class Limits:
    """What the partition allows and holds."""

    device_bytes: float | None
    host_bytes: float | None  # per node
    max_nodes: int
    max_gpus_per_node: int
    devices_per_node: tuple[int, ...] = ()  # allowed counts, when the accelerator has a rule (Ascend)


def half(precision: str) -> bool:
    return precision in ("bf16", "fp16")


def params_per_rank(m: ModelFacts, s: Setup) -> float:
    """Parameters of one replica a rank holds: the tp_plan's share split over the tensor-parallel ranks."""
    if s.tensor_parallel == 1:
        return float(m.params)
    return m.params - m.tp_params + m.tp_params / s.tensor_parallel


def state_bytes(params: float, s: Setup) -> tuple[float, float, float, float]:
    """(parameters, gradients, optimizer states) on each device and the bytes one rank offloads to the host."""
    n = s.world_size
    if s.engine == "ddp":
        return 4.0 * params, 4.0 * params, float(ADAM_MOMENTS * params), 0.0
    p = 2 if half(s.precision) else 4
    stage = s.zero_stage
    # the fp32 master copy: for 16-bit parameters; for fp32 ones ZeRO-1/2 copy their partition, ZeRO-3 steps
    # its fp32 shards in place (measured: tests/integration/test_plan_vs_engine.py)
    master = 4 if (p == 2 or stage in (1, 2)) else 0
    on_params = params * p / (n if stage == 3 else 1)
    # ZeRO-1 keeps whole gradients only while they accumulate over micro-steps; with no accumulation each
    # bucket is reduced into this rank's partition as backward makes it, as under ZeRO-2
    partitioned_grads = stage >= 2 or (stage == 1 and s.grad_accum == 1)
    on_grads = params * p / (n if partitioned_grads else 1)
    on_optim = params * (master + ADAM_MOMENTS) / (n if stage >= 1 else 1)
    host = 0.0
    if s.offload_optimizer and stage >= 1:
        # the gradients go (bucket by bucket) to the fp32 partition on the host that the host optimizer steps
        # with: none stay on the device but the buckets (buffer_bytes)
        host += on_optim + params * 4 / n
        on_optim = on_grads = 0.0
    if s.offload_param and stage == 3:
        host += on_params
        on_params = 0.0
    return on_params, on_grads, on_optim, host


def activation_bytes(m: ModelFacts, s: Setup) -> float:
    """The activations kept for backward for one micro-batch."""
    a = 2 if half(s.precision) else 4
    tokens = s.seq_len * s.micro_batch
    tp = s.tensor_parallel
    h, i = m.hidden, m.intermediate / tp  # the intermediate-size tensors are split over tensor-parallel ranks
    kv = h * m.kv_heads / max(m.heads, 1)
    norms = 2 * h * a
    attention = h * a + (h + 2 * kv + h) * a / tp + h  # qkv input; q, k, v and attention output; dropout mask
    if m.gated_mlp:
        mlp = h * a + 4 * i * a  # input; gate, up, act(gate), their product
    else:
        mlp = h * a + 2 * i * a + h  # input; act input, act output; dropout mask
    if m.composite_act and not s.compiled:
        mlp += COMPOSITE_ACT_TENSORS * i * a  # eager: each op of the activation keeps its output
    if m.experts > 1:
        mlp = m.top_k * mlp + m.experts * 4  # each token through top_k experts; fp32 router logits
    layer = tokens * (norms + attention + mlp)
    if m.attention_scores:  # scaled scores, scores + mask, softmax: s x s per head and sequence
        layer += 3 * s.micro_batch * (m.heads / tp) * s.seq_len * s.seq_len * a
    if s.checkpointing:
        layers = m.layers * tokens * h * a + layer  # layer inputs, one layer recomputed at a time
    else:
        layers = m.layers * layer
    embeddings = 2 * tokens * h * a  # embedding output, final norm
    # logits; for the loss their fp32 copy and log-softmax (eager), or one fused fp32 pass (compiled); the
    # training forward keeps the logits of the tokens the loss reads and, as backward starts, their gradient
    if s.fast_forward:
        logits = tokens * s.logit_share * m.vocab * 2 * a
    else:
        logits = tokens * m.vocab * (a + (4 if s.compiled else 8))
    return float(layers + embeddings + logits)


def buffer_bytes(m: ModelFacts, s: Setup) -> float:
    """Communication buffers and gathered parameters."""
    if s.engine == "ddp":  # DDP's gradient buckets (FSDP's replica all-reduce): a copy of the gradients
        return 4.0 * params_per_rank(m, s) if s.dp_size > 1 else 0.0
    p = 2 if half(s.precision) else 4
    bucket = min(DS_BUCKET, m.params) * p
    if s.zero_stage == 3:
        # the layer being computed gathered whole, the next one prefetched, one reduce bucket
        return float((m.largest_block + min(DS_PREFETCH, m.largest_block)) * p + bucket)
    if s.zero_stage in (1, 2):
        return float(2 * bucket)  # reduce and all-gather buckets
    return float(bucket)


def estimate(m: ModelFacts, s: Setup) -> Estimate:
    params, grads, optim, host = state_bytes(params_per_rank(m, s), s)
    acts = activation_bytes(m, s)
    buffers = buffer_bytes(m, s)
    runtime = RUNTIME_GIB.get(s.accelerator, DEFAULT_RUNTIME_GIB) * GIB
    reserve = runtime + FRAGMENTATION * (params + grads + optim + acts + buffers)
    return Estimate(params, grads, optim, acts, buffers, reserve, host * s.gpus_per_node)


def fits(m: ModelFacts, s: Setup, limits: Limits) -> bool:
    e = estimate(m, s)
    if limits.device_bytes is None:
        return True
    host_ok = limits.host_bytes is None or e.host_per_node <= limits.host_bytes
    return e.total <= limits.device_bytes and host_ok


def checkpoint_bytes(m: ModelFacts, s: Setup) -> float:
    """One checkpoint of the whole job on disk: the weights and the optimizer state of one replica, however the
    ranks share them (ZeRO shards are written by every rank, a DDP checkpoint by rank 0). Per parameter: torch
    (DDP, fp32) 4 + 8 moments; DeepSpeed the weights in its precision + the fp32 master (16-bit weights, or
    ZeRO-1/2 of fp32 ones) + 8 moments (Mixtral-8x7B bf16 under ZeRO-3: 14 bytes x 46.7 B = 609 GiB)."""
    if s.engine == "ddp":
        return float(m.params * (4 + ADAM_MOMENTS))
    p = 2 if half(s.precision) else 4
    master = 4 if (p == 2 or s.zero_stage in (1, 2)) else 0
    return float(m.params * (p + master + ADAM_MOMENTS))
