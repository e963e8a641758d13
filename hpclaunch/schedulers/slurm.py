"""Slurm: sbatch --parsable to submit; squeue, then sacct, then scontrol for status (so status works
when accounting is disabled or purged); scancel to cancel. All through the command-runner seam."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpclaunch import cmd
from hpclaunch.errors import CommandError
from hpclaunch.schedulers.base import JobStatus, Scheduler

_SQUEUE_FORMAT = "%i|%T|%r|%N|%M|%l"
_SACCT_FIELDS = "JobIDRaw,State,ExitCode,NodeList,Elapsed,Timelimit,Reason"


def _state(raw: str) -> str:
    # sacct prints "CANCELLED by 0"; squeue prints plain names
    return raw.split()[0].rstrip("+") if raw else "UNKNOWN"


def _none(value: str) -> str | None:
    value = value.strip()
    return None if value in ("", "None", "(null)", "n/a") else value


class SlurmScheduler(Scheduler):
    name = "slurm"

    def check_available(self) -> None:
        cmd.require("sbatch")

    def submit(self, script: Path, run_dir: Path) -> str:
        proc = cmd.run(["sbatch", "--parsable", str(script)], timeout=120)
        job_id = proc.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise CommandError(f"sbatch answered {proc.stdout.strip()!r}, not a job id")
        return job_id

    def _squeue(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        proc = cmd.run(["squeue", "--noheader", f"--format={_SQUEUE_FORMAT}", f"--jobs={','.join(ids)}"],
                       check=False)
        out: dict[str, JobStatus] = {}
        for line in proc.stdout.splitlines():
            parts = line.split("|")
            if len(parts) != 6 or parts[0] not in ids:
                continue
            jid, state, reason, nodes, elapsed, limit = parts
            out[jid] = JobStatus(jid, _state(state), _none(reason), None, _none(nodes), elapsed, limit,
                                 source="squeue")
        return out

    def _sacct(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        proc = cmd.run(["sacct", "--noheader", "--parsable2", "--allocations", f"--format={_SACCT_FIELDS}",
                        f"--jobs={','.join(ids)}"], check=False)
        out: dict[str, JobStatus] = {}
        if proc.returncode != 0:
            return out  # accounting disabled: fall back to scontrol
        for line in proc.stdout.splitlines():
            parts = line.split("|")
            if len(parts) != 7 or parts[0] not in ids:
                continue
            jid, state, exit_code, nodes, elapsed, limit, reason = parts
            out[jid] = JobStatus(jid, _state(state), _none(reason), exit_code, _none(nodes), elapsed, limit,
                                 source="sacct")
        return out

    def _scontrol(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        """One `scontrol show job` call: for one id that job, for several every job slurmctld still knows
        (so many finished jobs cost one call, with accounting disabled too)."""
        argv = ["scontrol", "show", "job", "--oneliner"] + ([ids[0]] if len(ids) == 1 else [])
        proc = cmd.run(argv, check=False)
        out: dict[str, JobStatus] = {}
        if proc.returncode != 0:
            return out
        for line in proc.stdout.splitlines():
            fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
            jid = fields.get("JobId", "")
            if jid not in ids:
                continue
            out[jid] = JobStatus(jid, _state(fields.get("JobState", "")), _none(fields.get("Reason", "")),
                                 fields.get("ExitCode"), _none(fields.get("NodeList", "")),
                                 fields.get("RunTime"), fields.get("TimeLimit"), source="scontrol")
        return out

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        ids = [str(j) for j in job_ids]
        if not ids:
            return {}
        found = self._squeue(ids)
        missing = [j for j in ids if j not in found or found[j].state == "COMPLETING"]
        if missing:
            found.update(self._sacct(missing))
        missing = [j for j in ids if j not in found or found[j].state == "COMPLETING"]
        if missing:
            found.update(self._scontrol(missing))
        for jid in ids:
            found.setdefault(jid, JobStatus(jid, "UNKNOWN", source="none"))
        return found

    def cancel(self, job_id: str) -> None:
        cmd.run(["scancel", "--full", str(job_id)])
