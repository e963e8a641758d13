"""GPT-2 causal language model on grouped blocks of text (seed 000's demo, its loop bugs fixed).

Submit it (the job script starts this file on every rank, with --config RUN_DIR/resolved.yaml):

    hpclaunch submit recipes/gpt2 --profile local --preset tiny --follow          # CPU, seconds
    hpclaunch submit recipes/gpt2 --profile guangzhou-a800 --layout 2n8g          # GPT-2 124M, DDP
    hpclaunch submit recipes/gpt2 --profile local --preset tiny \
        --set launcher=deepspeed --set deepspeed.zero_stage=1                     # same run, DeepSpeed ZeRO-1

The runtime library (hpclaunch/runtime) supplies the device and collective backend from the profile,
assets from the offline store, the data pipeline, the training loop, metrics and checkpoints.
"""

from hpclaunch.config.precision import precision_for
from hpclaunch.runtime.train import build, data, engine, fastpath, job, metrics
from hpclaunch.runtime.train.distributed import init_distributed
from hpclaunch.runtime.train.loop import train


def main() -> None:
    args = job.parse_args()
    j = job.load_job(args)
    spec, t = j.spec, j.train
    use_deepspeed = j.deepspeed_config is not None  # the deepspeed launcher passes --deepspeed_config

    # 1. Device and process group: cuda/nccl, musa/mccl, npu/hccl or cpu/gloo, from the profile.
    d = init_distributed(deepspeed=use_deepspeed, seed=t.seed, threads=t.threads_per_rank,
                         deterministic=t.deterministic)
    log = (lambda msg: print(f"[gpt2] {msg}", flush=True)) if d.is_main else (lambda msg: None)
    how = f"DeepSpeed ZeRO-{spec.zero_stage}" if use_deepspeed else "DDP"
    log(f"{d.world_size} rank(s) on {d.accelerator}/{d.backend}, precision {precision_for(spec)}, {how}")

    # 2. Tokenizer and model: staged in the store (full) or generated and cached there (tiny).
    tokenizer, tokenizer_src, model = build.load_tokenizer_and_model(j, d, log)
    # GPT-2's blocks written out for training: fused QKV, causal FlashAttention, no cache (fastpath.py)
    if fastpath.install(model, checkpointing=t.activation_checkpointing, tensor_parallel=d.tensor_parallel):
        log("training forward: hpclaunch.runtime.train.fastpath (GPT-2 blocks, causal SDPA)")

    # 3. Data: tokenized and grouped into blocks of seq_len once (cached), sharded per rank.
    blocks = data.prepare_blocks(spec, tokenizer, tokenizer_src, d)
    batches, eval_batches = data.train_and_eval_batches(blocks, t, d)

    # 4. Causal LM: the labels are the inputs (the model shifts them by one).
    def make_inputs(block, step, micro):
        ids = block.to(d.device, non_blocking=True)
        return {"input_ids": ids, "labels": ids}

    flops = metrics.flops_per_token(model, t.seq_len)
    if use_deepspeed:
        eng = engine.DeepSpeedEngine(model, t, d, j.deepspeed_config)
    else:
        eng = engine.TorchEngine(model, t, d, precision_for(spec), spec.grad_accum)

    # 5. The loop: resumes from the newest checkpoint by itself, logs metrics, saves, evaluates.
    train(
        job=j,
        d=d,
        engine=eng,
        batches=batches,
        eval_batches=eval_batches,
        make_inputs=make_inputs,
        writer=metrics.MetricsWriter(j.run_dir, d.rank, j.spec),
        flops_per_token=flops,
        log=log,
    )
    d.barrier()
    log("done")


if __name__ == "__main__":
    job.run_main(main)
