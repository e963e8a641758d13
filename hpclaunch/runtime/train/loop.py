"""The training loop every recipe shares (a recipe script builds the parts and calls `train`).

Per optimizer step: zero grads; for each micro-batch forward + backward (gradients all-reduced on
the last one only); clip the unscaled gradients; optimizer step; LR schedule step. Losses stay on
the device and are synchronised only at log steps (no per-step host sync). SIGUSR1/SIGTERM (Slurm's
warning before a time limit or preemption) make every rank save a checkpoint at the next log step
and exit 0; the requeued job resumes from it. So does the job's end coming nearer than one more window and a
checkpoint (hpclaunch/runtime/train/deadline.py): the ranks save on their own, before the signal.
After each optimizer step the node keeps a snapshot of the replica's state in memory (peer.py; under DeepSpeed
ZeRO-1/2 each rank its own partition, dspeer.py): a relaunch inside the allocation goes on from it, where it is
newer than the newest checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import torch

from hpclaunch.runtime.node import progress
from hpclaunch.runtime.node.inject import Injector
from hpclaunch.runtime.train import checkpoint, deadline, dspeer, peaks, peer, startup
from hpclaunch.runtime.train.distributed import Dist, all_reduce_max, all_reduce_mean
from hpclaunch.state import timeline
from hpclaunch.state.runfiles import ENV_RESTART, RunFiles

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
    with _eager(), torch.no_grad():
        for i, batch in enumerate(blocks):
            if steps and i >= steps:
                break
            total += engine.forward_loss(make_inputs(batch, -1, i)).float()
            n += 1
    engine.model.train()
    return all_reduce_mean(total / max(n, 1), d).item()


def _eager() -> contextlib.AbstractContextManager[object]:
    """A compiled model runs eager for evaluation: compiled, it would recompile for eval mode (its dropout
    flags are guarded; a minute for BERT-large on an H100) to run a few batches (torch >= 2.6). Without
    torch._dynamo loaded nothing was compiled, and set_stance would import it (1-2 s of CPU with sympy)."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is None or "torch._dynamo" not in sys.modules:
        return contextlib.nullcontext()
    return set_stance("force_eager")


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
    """Optimizer steps from the newest checkpoint (or step 0) to max_steps; a stop signal saves and returns early."""
    with writer:  # closes the trackers at the end (W&B: finished, or failed when the loop raised)
        t = job.train
        run = _Run(job, d, engine, batches, eval_batches, make_inputs, writer, flops_per_token, log)
        prog, accum, stop_at = run.prog, run.accum, run.stop_at
        stopping = False  # the ranks' agreed decision (a signal may reach them at different steps)
        start, ckpt = run.resume()
        snaps = run.peer
        engine.model.train()
        window = _Window(d)
        step = start
        for step in range(start + 1, t.max_steps + 1):
            step_t0 = time.perf_counter()
            lr = engine.lr  # the rate this step uses (read before DeepSpeed steps its scheduler)
            engine.zero_grad()
            for micro in range(accum):
                prog.enter("data", step - 1)
                inputs = make_inputs(batches.next(), step, micro)
                prog.enter("forward")
                window.loss_sum += engine.micro_step(inputs, last=micro == accum - 1).float()
            prog.enter("optimizer")
            if snaps is not None:
                snaps.before_update()  # the device waits for the last snapshot's copy before the update
            grad_norm = engine.step()
            prog.enter("optimizer", step)
            if snaps is not None:
                snaps.take(step, {"data": batches.position})  # in node memory: a relaunch goes on from here
            window.steps += 1
            if step == start + 1:
                run.first_step_done()

            last = step == t.max_steps
            if step % t.log_every == 0 or last or step == stop_at:
                run.log_step(window, step, lr, grad_norm)  # the loss reaches the host here only
                stopping = run.stop_agreed()
                window.reset()
            if step == stop_at or (stopping and not last):
                run.stop_here(step)
                return
            if t.eval_every and step % t.eval_every == 0 and not last:
                run.run_eval(step)
            if t.save_every and step % t.save_every == 0 and not last:
                run.save(step)
            run.inject.after_step(step, time.perf_counter() - step_t0)
        run.run_eval(step)
        if step > start or ckpt is None:
            run.save(step, "final")
        run.done(step)


class _Window:
    """The steps since the last log step: their losses summed on the device, read only at the next log step."""

    def __init__(self, d: Dist) -> None:
        self.loss_sum, self.steps = torch.zeros((), device=d.device), 0
        d.synchronize()
        self.t0 = time.perf_counter()

    def reset(self) -> None:
        """Start the next window now, after a log step."""
        self.loss_sum.zero_()
        self.steps = 0
        self.t0 = time.perf_counter()


@dataclass
class _Run:
    """One training run's parts and controls, shared by its set-up, evaluation, checkpoints and logging."""

    job: Job
    d: Dist
    engine: Engine
    batches: Batches
    eval_batches: Batches | None
    make_inputs: Inputs
    writer: MetricsWriter
    flops_per_token: float
    log: Callable[[str], None]

    def __post_init__(self) -> None:
        """Set up what the loop reads: the step's shape, the peak for MFU, stop signals, watchdog, fault injection."""
        self.accum, self.mb, self.seq = self.engine.accum, self.batches.micro_batch_size, self.job.train.seq_len
        self.peak = peak_of(self.job, self.d)
        self.stop_at = int(os.environ.get("HPCLAUNCH_STOP_AT_STEP", "0") or 0)  # tests: act as if preempted here
        self.stop = StopRequest()
        self.prog = progress.current()  # step and phase for the node supervisor's hang watchdog (no syscall here)
        self.inject = Injector.from_env(self.d.rank)  # HPCLAUNCH_INJECT: rehearse a hang, crash, kill or straggler
        self.saver = checkpoint.Saver(self.job.run_dir, self.d)
        self.why = "stop_at"  # why the ranks stop early: signal | end (the time limit near) | stop_at (tests)
        self.clock = self._end_clock()
        # in-memory snapshots for a relaunch to take a peer's state from (None: it loads the checkpoint; peer.py)
        kind = dspeer.PartitionSnapshots if getattr(self.engine, "zero_stage", None) is not None else peer.Snapshots
        self.peer = kind.for_run(self.job, self.d, self.engine, self.log)

    def _end_clock(self) -> deadline.EndClock:
        """Rank 0's clock for saving before the job's end (the others follow its decision)."""
        c = self.job.spec.checkpoint
        files = RunFiles(self.job.run_dir)
        write = deadline.expected_write(files, c.plan_bytes, c.write_gbps)
        return deadline.EndClock(deadline.end_time() if self.d.is_main else None, write, time.time())

    def resume(self) -> tuple[int, Path | None]:
        """(the step to go on from, the checkpoint it comes from): a relaunched or requeued job goes on where it
        stopped, from a data-parallel peer's snapshot in node memory where one is newer than the checkpoint."""
        files = RunFiles(self.job.run_dir)
        newest = files.latest_checkpoint()
        if self.peer is not None:
            client = self.peer.restore(newest[0] if newest else 0, self.job.train.seed)
            if client is not None:
                self.batches.restore(client["data"])
                return client["step"], None  # not on disk: the run's end saves it whatever its step
        if newest is None:
            return 0, None
        step, ckpt = newest
        client = checkpoint.load(self.engine, ckpt, self.d)
        start = client["step"]
        self.batches.restore(client["data"])
        if self.d.is_main:
            missed = {"peer_missed": self.peer.missed} if self.peer is not None and self.peer.missed else {}
            peer.record_resume(files, int(os.environ.get(ENV_RESTART, "0") or 0),
                               {"step": start, "source": "checkpoint", "path": str(ckpt), **missed})
        self.log(f"resumed from {ckpt} at step {start}")
        return start, ckpt

    def first_step_done(self) -> None:
        """Once: the model states this rank holds, to check the memory plan against, and the start-up timeline's end."""
        self.writer.write("states", **self.engine.held_states(), world_size=self.d.world_size)
        self.writer.write("startup", **startup.usage())  # CPU seconds and packages from process start
        if self.d.is_main:
            self.d.synchronize()
            timeline.mark("first_step")

    def log_step(self, window: _Window, step: int, lr: float, grad_norm: torch.Tensor) -> None:
        """The window's loss averaged over ranks, its throughput and MFU: written to the metrics and printed."""
        d, seq = self.d, self.seq
        self.prog.enter("collective", step)
        loss = all_reduce_mean(window.loss_sum / window.steps, d).item()  # the one host sync
        d.synchronize()
        dt = time.perf_counter() - window.t0
        tokens = window.steps * self.accum * self.mb * seq * d.dp_size  # tensor-parallel ranks share their tokens
        tps = tokens / dt
        mfu = tps / d.world_size * self.flops_per_token / (self.peak * 1e12) if self.peak else None
        self.writer.write(
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
        self.log(
            f"step {step}/{self.job.train.max_steps}: loss {loss:.4f} lr {lr:.3e} grad_norm {float(grad_norm):.3f} "
            f"{tps:,.0f} tokens/s" + (f" mfu {mfu:.1%}" if mfu is not None else "")
        )

    def stop_agreed(self) -> bool:
        """Whether any rank got a stop signal, or rank 0 finds the job's end too near to go on (1, 2): all ranks
        must save the same step and leave together."""
        near = self.clock.must_save(time.time())
        flag = torch.tensor(2.0 if near else float(self.stop.requested), device=self.d.device)
        agreed = all_reduce_max(flag, self.d).item()
        if agreed:
            self.why = "end" if agreed == 2 else "signal"
        if near:
            self.log(f"hpclaunch: saving before the time limit: {near}")
        return bool(agreed)

    def stop_here(self, step: int) -> None:
        """Save and leave before max_steps (a signal, the job's end near, or HPCLAUNCH_STOP_AT_STEP): the requeued
        (or follow-on) job resumes here. Stopped for the end, rank 0 tells the job script (progress/stopped.*)."""
        self.save(step, self.why)
        self.saver.wait()
        if self.why == "end" and self.d.is_main:
            restart = int(os.environ.get(ENV_RESTART, "0") or 0)
            RunFiles(self.job.run_dir).stopped(restart).write_text(json.dumps({"step": step, "why": "end"}) + "\n")
        self.log(f"stopped at step {step}; the checkpoint is saved and a restarted job resumes from it")
        self.done(step)

    def save(self, step: int, why: str = "interval") -> None:
        """A checkpoint with the data position, so a resumed run sees the batches it has not seen yet; written in
        the background where the engine allows (hpclaunch/runtime/train/checkpoint.py)."""
        self.prog.enter("checkpoint", step)
        # the metrics up to this step reach the run directory before the checkpoint can be complete: a rank killed
        # later loses only lines of steps that a relaunch from this checkpoint computes (and logs) again
        self.writer.flush()
        path = self.saver.save(self.engine, step, {"data": self.batches.position}, why)
        self.log(f"checkpoint {path} ({why})")

    def run_eval(self, step: int) -> None:
        """The eval loss and perplexity, when the recipe has eval batches: written to the metrics and printed."""
        if self.eval_batches is None:
            return
        self.prog.enter("eval", step)
        loss = evaluate(self.engine, self.eval_batches, self.make_inputs, self.job.train.eval_steps, self.d)
        ppl = math.exp(min(loss, 50.0))
        self.writer.write("eval", step=step, eval_loss=loss, perplexity=ppl)
        self.log(f"eval step {step}: loss {loss:.4f} perplexity {ppl:.2f}")

    def done(self, step: int) -> None:
        """Wait for the pending checkpoint write, then tell the hang watchdog this rank is done, now: an exit is not
        a hang."""
        self.saver.wait()
        if self.peer is not None:
            self.peer.close()  # the run ended or stopped with a checkpoint: the node memory is given back
        self.prog.enter("done", step)
        self.prog.flush()
