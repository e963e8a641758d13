"""msrun runs this file for every worker (and its scheduler): ``python msrun_worker.py SCRIPT ARGS...``.

hpclaunch copies it into the run directory (``msrun_worker.py``) and names it as msrun's script. It runs
the recipe script as ``__main__`` and, when a worker fails, writes ``<rank> <code>`` to
``$HPCLAUNCH_MSRUN_STATUS_DIR/worker_<rank>.exit`` (the folder is set by msrun-node.sh), because msrun
itself returns only 0 or 1; msrun-node.sh then exits with that code. Standard library only.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback

from hpclaunch.state import timeline
from hpclaunch.state.runfiles import ENV_MSRUN_STATUS_DIR, msrun_exit_name


def exit_code(exc: SystemExit) -> int:
    """The process exit code a SystemExit stands for (a message means 1, as Python itself does)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def record_failure(code: int) -> None:
    """One error line in the worker's own log (so `hpclaunch logs --diagnose` finds this rank) and the
    status file with the worker's real exit code. Only workers, not msrun's scheduler process."""
    if not code or os.environ.get("MS_ROLE") != "MS_WORKER":
        return
    rank = os.environ.get("RANK_ID", "unknown")
    print(f"WorkerExitError: msrun worker rank {rank} exited with code {code}", file=sys.stderr)
    status_dir = os.environ.get(ENV_MSRUN_STATUS_DIR)
    if status_dir:
        with open(os.path.join(status_dir, msrun_exit_name(rank)), "w") as f:
            f.write(f"{rank} {code}\n")


def main(argv: list[str]) -> int:
    if os.environ.get("MS_ROLE") == "MS_WORKER":
        timeline.mark("ranks_started")  # worker 0 only
    script = argv[0]
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        record_failure(code)
        sys.stdout.flush()
        sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
