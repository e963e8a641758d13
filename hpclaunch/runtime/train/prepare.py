"""Tokenize and group a recipe's dataset into the asset store ahead of the job, so a GPU job starts
training at once instead of tokenizing on its first minutes (``hpclaunch stage-assets RECIPE
--profile P --prepare`` runs this in a child process: the CLI itself never imports torch).

    python -m hpclaunch.runtime.train.prepare RUN_OR_TMP/resolved.yaml

It builds exactly the cache the job's ranks look for (STORE/generated/data/<key>, keyed by the
dataset, the tokenizer and seq_len), offline, from the staged assets, and prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    import torch

    from hpclaunch.config.jobspec import load_jobspec
    from hpclaunch.runtime.train import data
    from hpclaunch.runtime.train.distributed import Dist
    from hpclaunch.runtime.train.tokenizer import load_tokenizer

    spec = load_jobspec(sys.argv[1])
    alone = Dist(rank=0, world_size=1, local_rank=0, accelerator="cpu", backend="gloo", device=torch.device("cpu"))
    t0 = time.monotonic()
    tokenizer, tokenizer_src = load_tokenizer(spec, alone)
    blocks = data.prepare_blocks(spec, tokenizer, tokenizer_src, alone)
    print(json.dumps({
        "recipe": spec.recipe.name,
        "preset": spec.preset,
        "seq_len": spec.recipe.train.seq_len,
        "blocks": {split: int(t.shape[0]) for split, t in blocks.items()},
        "seconds": round(time.monotonic() - t0, 3),
    }))


if __name__ == "__main__":
    from hpclaunch.runtime.train.job import run_main

    run_main(main)
