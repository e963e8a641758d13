"""Mixtral (mixture of experts) causal language model with DeepSpeed ZeRO-3 (seed 000).

    hpclaunch submit recipes/mixtral --profile local --preset tiny --follow         # CPU, seconds
    hpclaunch submit recipes/mixtral --profile guangzhou-a800                       # Mixtral-8x7B, 4n8g
    hpclaunch submit recipes/mixtral --profile musa-s4000 --preset shrunk           # seed 000's shrink

The full preset is Mixtral-8x7B at its real size, partitioned by ZeRO-3 while it loads. The shrunk preset
shrinks it with override_config.json the way seed 000 did (one hidden layer); an unknown or mistyped key
there stops the job with a message naming it. Under ZeRO-3 the
MoE block (MixtralSparseMoeBlock) is a leaf module: its experts are gathered whole, since each token
uses only some of them and per-expert gathers would differ between ranks and hang.
"""

from hpclaunch.precision import precision_for
from hpclaunch.runtime import build, data, engine, job, metrics
from hpclaunch.runtime.distributed import init_distributed
from hpclaunch.runtime.loop import train


def main() -> None:
    args = job.parse_args()
    j = job.load_job(args)
    spec, t = j.spec, j.train
    if j.deepspeed_config is None:
        raise SystemExit("mixtral runs under the deepspeed launcher (it needs --deepspeed_config)")

    # 1. Device and process group from the profile; DeepSpeed's init_distributed on top of it.
    d = init_distributed(deepspeed=True, seed=t.seed, threads=t.threads_per_rank,
                         deterministic=t.deterministic)
    log = (lambda msg: print(f"[mixtral] {msg}", flush=True)) if d.is_main else (lambda msg: None)
    log(
        f"{d.world_size} rank(s) on {d.accelerator}/{d.backend}, precision {precision_for(spec)}, "
        f"DeepSpeed ZeRO-{spec.recipe.deepspeed.zero_stage}"
    )

    # 2. Tokenizer and MixtralForCausalLM; override_config.json applied to the config first.
    tokenizer, tokenizer_src, model = build.load_tokenizer_and_model(j, d, log)

    # 3. Data: blocks of seq_len tokens, sharded per rank.
    blocks = data.prepare_blocks(spec, tokenizer, tokenizer_src, d)
    batches, eval_batches = data.train_and_eval_batches(blocks, t, d)

    def make_inputs(block, step, micro):
        ids = block.to(d.device, non_blocking=True)
        return {"input_ids": ids, "labels": ids}

    # 4. ZeRO-3 with the MoE blocks kept whole (deepspeed.leaf_modules in the recipe).
    flops = metrics.flops_per_token(model, t.seq_len)
    eng = engine.DeepSpeedEngine(
        model, t, d, j.deepspeed_config, leaf_modules=spec.recipe.deepspeed.leaf_modules
    )

    # 5. The loop: resumes from the newest checkpoint by itself, logs metrics, saves, evaluates.
    train(
        job=j,
        d=d,
        engine=eng,
        batches=batches,
        eval_batches=eval_batches,
        make_inputs=make_inputs,
        writer=metrics.MetricsWriter(j.run_dir, d.rank),
        flops_per_token=flops,
        log=log,
    )
    d.barrier()
    log("done")


if __name__ == "__main__":
    job.run_main(main)
