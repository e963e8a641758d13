"""What a recipe script starts with: its arguments and the resolved job spec.

A recipe's script is started as ``train.py --config RUN_DIR/resolved.yaml`` (plus ``--deepspeed_config
RUN_DIR/ds_config.json`` under the deepspeed launcher). ``HPCLAUNCH_CONFIG``, which the job script exports for
every script, is the fallback, and all an ad-hoc script (``hpclaunch submit train.py -- ARGS``) gets: it reads
its own arguments, and ``load_job(parse_args([]))`` its config.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.config.jobspec import JobSpec, load_jobspec
from hpclaunch.errors import HpclaunchError

if TYPE_CHECKING:
    from hpclaunch.config.recipe import TrainSpec


@dataclass(frozen=True)
class Job:
    spec: JobSpec
    run_dir: Path
    deepspeed_config: Path | None

    @property
    def train(self) -> TrainSpec:
        return self.spec.recipe.train

    @property
    def tensor_parallel(self) -> int:
        """parallel.model_parallel: ranks per model replica (1 without a parallel section)."""
        par = self.spec.recipe.parallel
        return par.model_parallel if par is not None else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="an hpclaunch recipe script")
    p.add_argument(
        "--config",
        default=os.environ.get("HPCLAUNCH_CONFIG"),
        help="the resolved.yaml of the run (default: $HPCLAUNCH_CONFIG)",
    )
    p.add_argument(
        "--deepspeed_config", default=None, help="ds_config.json (the deepspeed launcher passes it)"
    )
    p.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def load_job(args: argparse.Namespace) -> Job:
    if not args.config:
        raise HpclaunchError(
            "no job config: pass --config RUN_DIR/resolved.yaml or set HPCLAUNCH_CONFIG",
            hint="submit the recipe with `hpclaunch submit RECIPE --profile P`",
        )
    spec = load_jobspec(args.config)
    run_dir = Path(os.environ.get("HPCLAUNCH_RUN_DIR") or Path(args.config).resolve().parent)
    ds = Path(args.deepspeed_config) if args.deepspeed_config else None
    if ds is None and spec.recipe.launcher == "deepspeed":
        candidate = run_dir / "ds_config.json"
        ds = candidate if candidate.is_file() else None
    return Job(spec, run_dir, ds)


def run_main(main: Callable[[], None]) -> None:
    """Run a script's main: a user error prints one line and exits 2 (no traceback)."""
    try:
        main()
    except HpclaunchError as e:
        print(f"hpclaunch: error: {e}", file=sys.stderr, flush=True)
        sys.exit(e.exit_code)
