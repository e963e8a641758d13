"""`hpclaunch logs JOB --diagnose` for a job submitted over SSH (docs/remote.md): the diagnosis reads only the end
of each log (hpclaunch.logs.diagnose.TAIL_BYTES), so only those ends cross the connection, never a whole log.

On the login node, one shell script cuts the last TAIL_BYTES of every file under the run directory's logs/ (rank
logs, the job's output, the watchdog's verdicts) into a temporary folder, each with its file's time, adds the
names of the checkpoint folders (empty: a cancelled job's hint names the newest), and sends that folder as one tar
stream, with the recoveries and the timeline (a job that recovered inside its allocation), the ranks' progress
records (the node of a rank) and their exit records (the first failing rank, without torchrun's agent). The
diagnosis runs here on that copy (the free space of the job's filesystems is not measured: they are not here); the
paths it names are then those of the login node."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.remote import SshHost
from hpclaunch.logs.diagnose import TAIL_BYTES, Diagnosis, diagnose

if TYPE_CHECKING:
    from hpclaunch.schedulers.base import JobStatus

# $1: the run directory, $2: how many bytes of the end of each log
_ENDS = """t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
if cd "$1" 2>/dev/null; then
  find logs -type f 2>/dev/null | while IFS= read -r f; do
    mkdir -p "$t/${f%/*}" && tail -c "$2" -- "$f" > "$t/$f" && touch -r "$f" -- "$t/$f"
  done
  find checkpoints -mindepth 1 -maxdepth 1 -type d 2>/dev/null | while IFS= read -r d; do mkdir -p "$t/$d"; done
  for f in recoveries.jsonl timeline.jsonl; do [ -f "$f" ] && cp -p -- "$f" "$t/$f"; done
  mkdir -p "$t/progress" && for f in progress/node-*.json progress/rank-*.json progress/rank-*.exit; do
    [ -f "$f" ] && cp -p -- "$f" "$t/$f"
  done
fi
tar -c -C "$t" -f - .
"""


def log_ends(host: SshHost, run_dir: Path) -> Path:
    """A local folder laid out as `run_dir` with the last TAIL_BYTES of each of its logs (times kept)."""
    root = hpclaunch_home() / "remote" / f"{run_dir.name}.diagnose"
    shutil.rmtree(root, ignore_errors=True)
    host.get_tar(["sh", "-c", _ENDS, "sh", str(run_dir), str(TAIL_BYTES)], root,
                 f"the logs of {host.target.label}:{run_dir}")
    return root


def diagnose_remote(host: SshHost, run_dir: Path, job_id: str, status: JobStatus | None, *,
                    restart: int | None = None) -> Diagnosis:
    """The diagnosis of the job whose run directory `run_dir` is on the login node, from the ends of its logs."""
    local = log_ends(host, run_dir)
    try:
        d = diagnose(local, job_id, status, restart=restart, local=False)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    def there(text: str) -> str:  # a path (or a hint naming one) in the local copy, as the login node's path
        return text.replace(str(local), str(run_dir))

    def moved(items: list[dict]) -> list[dict]:
        return [{**item, "file": there(item["file"])} if item.get("file") else item for item in items]

    return dataclasses.replace(d, file=d.file and there(d.file), checkpoint=d.checkpoint and there(d.checkpoint),
                               hint=there(d.hint), candidates=moved(d.candidates), suspicious=moved(d.suspicious))
