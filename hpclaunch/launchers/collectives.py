"""How long a collective may wait, passed to each vendor's backend the way it reads it.

The runtime passes ``HPCLAUNCH_COLLECTIVE_TIMEOUT`` to ``init_process_group(timeout=)`` (every backend).
On top, per accelerator (anchors: PyTorch's ProcessGroupNCCL variables, Ascend's HCCL documentation):

- cuda (NCCL): tear the process group down on a timeout or error (``TORCH_NCCL_ASYNC_ERROR_HANDLING=3``)
  instead of hanging, keep the watchdog's heartbeat monitor on, and leave evidence: the flight recorder
  (``TORCH_NCCL_TRACE_BUFFER_SIZE``) dumps every rank's last collectives into the run's logs/ folder on
  a timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``).
- npu (HCCL): ``HCCL_EXEC_TIMEOUT`` (a collective's execution, at most 17340 s) and
  ``HCCL_CONNECT_TIMEOUT`` (building the links, 120-7200 s), whose expiry is the usual EI0006.
- musa (MCCL) and cpu (gloo): the process-group timeout alone (no documented variables).

A profile's or recipe's own ``env`` overrides any of these.
"""

from __future__ import annotations

from pathlib import Path

TIMEOUT_VAR = "HPCLAUNCH_COLLECTIVE_TIMEOUT"


def collective_env(accelerator: str, timeout: float, log_dir: Path) -> dict[str, str]:
    seconds = max(1, int(timeout))
    env = {TIMEOUT_VAR: str(seconds)}
    if accelerator == "cuda":
        env.update(
            TORCH_NCCL_ASYNC_ERROR_HANDLING="3",
            TORCH_NCCL_ENABLE_MONITORING="1",
            TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=str(seconds + 120),
            TORCH_NCCL_DUMP_ON_TIMEOUT="1",
            TORCH_NCCL_TRACE_BUFFER_SIZE="2000",
            TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(log_dir / "nccl_trace_rank_"),
        )
    elif accelerator == "npu":
        env.update(HCCL_EXEC_TIMEOUT=str(min(seconds, 17340)), HCCL_CONNECT_TIMEOUT=str(min(max(seconds, 120), 7200)))
    return env
