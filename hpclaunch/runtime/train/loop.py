"""The training loop every recipe shares (a recipe script builds the parts and calls `train`).

Per optimizer step: zero grads; for each micro-batch forward + backward (gradients all-reduced on
the last one only); clip the unscaled gradients; optimizer step; LR schedule step. Losses stay on
the device and are synchronised only at log steps (no per-step host sync). SIGUSR1/SIGTERM (Slurm's
warning before a time limit or preemption) make every rank save a checkpoint at the next log step
and exit 0; the requeued job resumes from it.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING

import torch

from hpclaunch.runtime.node import progress
from hpclaunch.runtime.node.inject import Injector
from hpclaunch.runtime.train import checkpoint, peaks
from hpclaunch.runtime.train.distributed import Dist, all_reduce_max, all_reduce_mean
from hpclaunch.state import timeline

if TYPE_CHECKING:
    from hpclaunch.runtime.train.data import Batches
    from hpclaunch.runtime.train.engine import Engine
    from hpclaunch.runtime.train.job import Job
    from hpclaunch.runtime.train.metrics import MetricsWriter

Inputs = Callable[[torch.Tensor, int, int], dict[str, torch.Tensor]]


class StopRequest:
    """Set by SIGUSR1/SIGTERM; ranks agree on it (max over ranks) at log steps."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        print(
            f"hpclaunch: got signal {signal.Signals(signum).name}: saving a checkpoint at the next log step",
            flush=True,
        )
        self.requested = True


def evaluate(engine: Engine, blocks: Iterable[torch.Tensor], make_inputs: Inputs, steps: int, d: Dist) -> float:
    """Mean loss over `steps` eval batches per rank (all of them when steps is 0), averaged over ranks."""
    engine.model.eval()
    total, n = torch.zeros((), device=d.device), 0
    with torch.no_grad():
        for i, batch in enumerate(blocks):
            if steps and i >= steps:
                break
            total += engine.forward_loss(make_inputs(batch, -1, i)).float()
            n += 1
    engine.model.train()
    return all_reduce_mean(total / max(n, 1), d).item()


def peak_of(job: Job, d: Dist) -> float | None:
    """Peak TFLOP/s per device for MFU: the partition's `peak_tflops`, else the device's from the table
    (a local GPU); None on the CPU."""
    if d.accelerator == "cpu":
        return None
    return job.spec.partition_spec.peak_tflops or peaks.peak_tflops(d.device_name())


def train(
    *,
    job: Job,
    d: Dist,
    engine: Engine,
    batches: Batches,
    eval_batches: Batches | None,
    make_inputs: Inputs,
    writer: MetricsWriter,
    flops_per_token: float,
    log: Callable[[str], None] = print,
) -> None:
    with writer:  # closes the trackers at the end (W&B: finished, or failed when the loop raised)
        t = job.train
        accum, mb, seq = engine.accum, batches.micro_batch_size, t.seq_len
        peak = peak_of(job, d)
        stop_at = int(os.environ.get("HPCLAUNCH_STOP_AT_STEP", "0") or 0)  # tests: act as if preempted here
        stop = StopRequest()
        prog = progress.current()  # step and phase for the node supervisor's hang watchdog (no syscall here)
        inject = Injector.from_env(d.rank)  # HPCLAUNCH_INJECT: rehearse a hang, crash, kill or straggler
        stopping = False  # the ranks' agreed decision (a signal may reach them at different steps)

        start = 0
        ckpt = checkpoint.latest(job.run_dir)
        if ckpt is not None:
            client = checkpoint.load(engine, ckpt, d)
            start = client["step"]
            batches.restore(client["data"])
            log(f"resumed from {ckpt} at step {start}")

        def save(step: int) -> None:
            prog.enter("checkpoint", step)
            path = checkpoint.save(engine, job.run_dir, step, {"data": batches.position}, d)
            log(f"checkpoint {path}")

        def run_eval(step: int) -> None:
            if eval_batches is None:
                return
            prog.enter("eval", step)
            loss = evaluate(engine, eval_batches, make_inputs, t.eval_steps, d)
            ppl = math.exp(min(loss, 50.0))
            writer.write("eval", step=step, eval_loss=loss, perplexity=ppl)
            log(f"eval step {step}: loss {loss:.4f} perplexity {ppl:.2f}")

        engine.model.train()
        loss_sum, steps_since = torch.zeros((), device=d.device), 0
        d.synchronize()
        t0 = time.perf_counter()
        step = start
        for step in range(start + 1, t.max_steps + 1):
            step_t0 = time.perf_counter()
            lr = engine.lr  # the rate this step uses (read before DeepSpeed steps its scheduler)
            engine.zero_grad()
            for micro in range(accum):
                prog.enter("data", step - 1)
                inputs = make_inputs(batches.next(), step, micro)
                prog.enter("forward")
                loss_sum += engine.micro_step(inputs, last=micro == accum - 1).float()
            prog.enter("optimizer")
            grad_norm = engine.step()
            prog.enter("optimizer", step)
            if step == start + 1:  # once: the model states this rank holds, to check the memory plan against
                writer.write("states", **engine.held_states(), world_size=d.world_size)
            steps_since += 1
            if step == start + 1 and d.is_main:  # once: the first step's end, for the start-up timeline
                d.synchronize()
                timeline.mark("first_step")

            last = step == t.max_steps
            if step % t.log_every == 0 or last or step == stop_at:
                prog.enter("collective", step)
                loss = all_reduce_mean(loss_sum / steps_since, d).item()  # the one host sync
                d.synchronize()
                dt = time.perf_counter() - t0
                tokens = steps_since * accum * mb * seq * d.dp_size  # tensor-parallel ranks share their tokens
                tps = tokens / dt
                mfu = tps / d.world_size * flops_per_token / (peak * 1e12) if peak else None
                writer.write(
                    "train",
                    step=step,
                    loss=loss,
                    lr=lr,
                    grad_norm=float(grad_norm),
                    tokens_per_s=tps,
                    samples_per_s=tps / seq,
                    peak_mem_bytes=d.peak_memory_bytes(),
                    mfu=mfu,
                    world_size=d.world_size,
                    tensor_parallel=d.tensor_parallel,
                )
                log(
                    f"step {step}/{t.max_steps}: loss {loss:.4f} lr {lr:.3e} grad_norm {float(grad_norm):.3f} "
                    f"{tps:,.0f} tokens/s" + (f" mfu {mfu:.1%}" if mfu is not None else "")
                )
                flag = torch.tensor(float(stop.requested), device=d.device)
                stopping = bool(all_reduce_max(flag, d).item())
                loss_sum.zero_()
                steps_since = 0
                t0 = time.perf_counter()
            if step == stop_at or (stopping and not last):
                save(step)
                log(f"stopped at step {step}; the checkpoint is saved and a restarted job resumes from it")
                prog.enter("done", step)
                prog.flush()
                return
            if t.eval_every and step % t.eval_every == 0 and not last:
                run_eval(step)
            if t.save_every and step % t.save_every == 0 and not last:
                save(step)
            inject.after_step(step, time.perf_counter() - step_t0)
        run_eval(step)
        if step > start or ckpt is None:
            save(step)
        prog.enter("done", step)
        prog.flush()
