"""BERT masked language model (15% of tokens masked) with DeepSpeed ZeRO-3 (seed 002), or DDP under torchrun
(seed 000's bert-base run).

    hpclaunch submit recipes/bert_large --profile local --preset tiny --follow     # CPU, seconds
    hpclaunch submit recipes/bert_large --profile cngrid12-v100 --layout 2n8g      # BERT-large, fp16
    hpclaunch submit recipes/bert_large --profile local --preset tiny \
        --set launcher=torchrun --set deepspeed=null                               # the same run, DDP

The deepspeed launcher starts this file on every rank with --config RUN_DIR/resolved.yaml and
--deepspeed_config RUN_DIR/ds_config.json (ZeRO stage, precision, batch sizes, clipping). The
optimizer is a client torch AdamW: nothing is JIT-compiled, on any accelerator. Under torchrun (no
--deepspeed_config) it trains data parallel with plain PyTorch, as recipes/gpt2 does.
"""

import torch

from hpclaunch.config.precision import precision_for
from hpclaunch.runtime.train import build, data, engine, fastpath, job, metrics
from hpclaunch.runtime.train.assets import fingerprint
from hpclaunch.runtime.train.distributed import init_distributed
from hpclaunch.runtime.train.loop import train


def main() -> None:
    args = job.parse_args()
    j = job.load_job(args)
    spec, t = j.spec, j.train
    use_deepspeed = j.deepspeed_config is not None  # the deepspeed launcher passes --deepspeed_config

    # 1. Device and process group from the profile (DeepSpeed's init_distributed on top of it).
    d = init_distributed(deepspeed=use_deepspeed, seed=t.seed, threads=t.threads_per_rank,
                         deterministic=t.deterministic)
    log = (lambda msg: print(f"[bert] {msg}", flush=True)) if d.is_main else (lambda msg: None)
    how = f"DeepSpeed ZeRO-{spec.zero_stage}" if use_deepspeed else "DDP"
    log(f"{d.world_size} rank(s) on {d.accelerator}/{d.backend}, precision {precision_for(spec)}, {how}")

    # 2. Tokenizer (WordPiece) and BertForMaskedLM: staged (full) or generated and cached (tiny).
    tokenizer, tokenizer_src, model = build.load_tokenizer_and_model(j, d, log)
    # The prediction head on the masked tokens only (fastpath.py): ~15 % of the work and no full logits
    sparse = fastpath.install(model, checkpointing=t.activation_checkpointing, tensor_parallel=1) is not None
    if sparse:
        log("training forward: hpclaunch.runtime.train.fastpath (prediction head on the masked tokens only)")

    # 3. Data: blocks of seq_len tokens (each record is [CLS] ... [SEP]), sharded per rank.
    blocks = data.prepare_blocks(spec, tokenizer, tokenizer_src, d)
    batches, eval_batches = data.train_and_eval_batches(blocks, t, d)

    # 4. Masking: 15% of the tokens; the generator is seeded from (seed, rank, step, micro-step), so
    #    a resumed run masks exactly as an uninterrupted one. Eval (step -1) masks the same every time.
    def make_inputs(block, step, micro):
        g = torch.Generator().manual_seed(int(fingerprint(t.seed, d.rank, step, micro), 16) % 2**63)
        inputs, labels = data.mask_tokens(block, tokenizer, t.mlm_probability, g)
        batch = {"input_ids": inputs.to(d.device), "labels": labels.to(d.device)}
        if sparse:  # the masked positions, counted here on the host: the device never waits on the count
            batch["masked"] = fastpath.masked_positions(labels, d.device)
        return batch

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
