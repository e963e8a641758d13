"""Mixtral (mixture of experts) causal language model with DeepSpeed ZeRO-3 (seed 000), or tensor x data
parallel under torchrun.

    hpclaunch submit recipes/mixtral --profile local --preset tiny --follow         # CPU, seconds
    hpclaunch submit recipes/mixtral --profile guangzhou-a800                       # Mixtral-8x7B, 4n8g
    hpclaunch submit recipes/mixtral --profile musa-s4000 --preset shrunk           # seed 000's shrink
    hpclaunch submit recipes/mixtral --profile local --preset tp                    # tp 2 x dp 2, CPU

The full preset is Mixtral-8x7B at its real size, partitioned by ZeRO-3 while it loads. The shrunk preset
shrinks it with override_config.json the way seed 000 did (one hidden layer); an unknown or mistyped key
there stops the job with a message naming it. Under ZeRO-3 the
MoE block (MixtralSparseMoeBlock) is a leaf module: its experts are gathered whole, since each token
uses only some of them and per-expert gathers would differ between ranks and hang.

Under the torchrun launcher (the `tp` presets) parallel.model_parallel ranks hold one replica's shards
(transformers' tp_plan: attention and expert projections split column- and row-wise) and the replicas train
data parallel (hpclaunch/runtime/train/tensor_parallel.py).
"""

from hpclaunch.config.precision import precision_for
from hpclaunch.runtime.train import build, data, engine, job, metrics
from hpclaunch.runtime.train.distributed import init_distributed
from hpclaunch.runtime.train.loop import train
from hpclaunch.runtime.train.tensor_parallel import TensorParallelEngine


def main() -> None:
    args = job.parse_args()
    j = job.load_job(args)
    spec, t = j.spec, j.train
    use_deepspeed = j.deepspeed_config is not None  # the deepspeed launcher passes --deepspeed_config

    # 1. Device and process group from the profile (DeepSpeed's init_distributed on top of it), and the
    #    ranks per model replica under tensor parallelism.
    d = init_distributed(deepspeed=use_deepspeed, seed=t.seed, threads=t.threads_per_rank,
                         deterministic=t.deterministic, tensor_parallel=j.tensor_parallel)
    log = (lambda msg: print(f"[mixtral] {msg}", flush=True)) if d.is_main else (lambda msg: None)
    if use_deepspeed:
        how = f"DeepSpeed ZeRO-{spec.zero_stage}"
    else:
        how = f"tensor parallel {d.tensor_parallel} x data parallel {d.dp_size}" if d.tensor_parallel > 1 else "DDP"
    log(f"{d.world_size} rank(s) on {d.accelerator}/{d.backend}, precision {precision_for(spec)}, {how}")

    # 2. Tokenizer and MixtralForCausalLM; override_config.json applied to the config first.
    tokenizer, tokenizer_src, model = build.load_tokenizer_and_model(j, d, log)

    # 3. Data: blocks of seq_len tokens, sharded per rank.
    blocks = data.prepare_blocks(spec, tokenizer, tokenizer_src, d)
    batches, eval_batches = data.train_and_eval_batches(blocks, t, d)

    def make_inputs(block, step, micro):
        ids = block.to(d.device, non_blocking=True)
        return {"input_ids": ids, "labels": ids}

    # 4. ZeRO-3 with the MoE blocks kept whole (deepspeed.leaf_modules in the recipe), or tensor x data
    #    parallel, or DDP.
    flops = metrics.flops_per_token(model, t.seq_len)
    if use_deepspeed:
        eng = engine.DeepSpeedEngine(
            model, t, d, j.deepspeed_config, leaf_modules=spec.deepspeed.leaf_modules
        )
    elif d.tensor_parallel > 1:
        eng = TensorParallelEngine(model, t, d, precision_for(spec), spec.grad_accum)
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
