"""torchrun's agent, quiet when it is told to stop: ``python -m hpclaunch.runtime.train.agent TORCHRUN-ARGS``.

The torchrun and deepspeed launchers start this instead of ``python -m torch.distributed.run``, with the same
arguments. On a stop signal (``hpclaunch cancel``, Slurm's SIGTERM or the USR1 before the time limit,
PET_SIGNALS_TO_HANDLE) torch's agent raises SignalException, passes the signal on to the ranks (which save a
checkpoint and stop, hpclaunch/runtime/train/loop.py `StopRequest`) and then lets the exception end the process
with its traceback; a second copy of the signal (the process group's and the node supervisor's both arrive)
interrupts its shutdown with more tracebacks. Here the first signal takes torch's own path, the copies that
follow are ignored, the agent's shutdown warnings are left out, and one line says what happened. The exit
status stays what torchrun's was (1): the job's state (cancelled, requeued) comes from the scheduler.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

STOPPED_EXIT_CODE = 1  # what torchrun exits with when a signal stops it


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing import api
    from torch.distributed.run import main as torchrun

    got: list[signal.Signals] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        if got:
            return  # the agent is already stopping its ranks: a copy of the signal must not interrupt that
        sig = signal.Signals(signum)
        got.append(sig)
        os.write(2, f"hpclaunch: torchrun got {sig.name}: stopping the ranks on this node (the job was cancelled, "
                    f"preempted or is near its time limit)\n".encode())
        logging.disable(logging.WARNING)  # torch's "Sending process N closing signal" and its like
        raise api.SignalException(f"Process {os.getpid()} got signal: {sig}", sigval=sig)

    # torch installs the module's handler by name when it starts the ranks (PContext.start)
    api._terminate_process_handler = stop  # type: ignore[assignment]
    try:
        torchrun(argv)
    except api.SignalException:
        return STOPPED_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
