"""Slurm: sbatch --parsable to submit; squeue, then sacct, then scontrol for status (so status works
when accounting is disabled or purged); scancel to cancel. All through the command-runner seam."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpclaunch import cmd
from hpclaunch.errors import CommandError
from hpclaunch.schedulers import slurm_output
from hpclaunch.schedulers.base import JobStatus, Scheduler


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

    # Status asks for text, not --json: the same on Slurm 21.08 to 24.x, and squeue --json before 23.02
    # ignores --jobs (it dumps every job of the cluster); see hpclaunch/schedulers/slurm_output.py.
    def _squeue(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        proc = cmd.run(["squeue", "--noheader", "--array", f"--format={slurm_output.SQUEUE_FORMAT}",
                        f"--jobs={','.join(ids)}"], check=False)
        return slurm_output.select(slurm_output.parse_squeue_text(proc.stdout), ids, "squeue")

    def _sacct(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        proc = cmd.run(["sacct", "--parsable2", "--allocations", f"--format={slurm_output.SACCT_FIELDS}",
                        f"--jobs={','.join(ids)}"], check=False)
        if proc.returncode != 0:
            return {}  # accounting disabled: fall back to scontrol
        return slurm_output.select(slurm_output.parse_sacct_text(proc.stdout), ids, "sacct")

    def _scontrol(self, ids: Sequence[str]) -> dict[str, JobStatus]:
        """One `scontrol show job` call: for one id that job, for several every job slurmctld still knows
        (so many finished jobs cost one call, with accounting disabled too)."""
        argv = ["scontrol", "show", "job", "--oneliner"] + ([ids[0]] if len(ids) == 1 else [])
        proc = cmd.run(argv, check=False)
        if proc.returncode != 0:
            return {}
        return slurm_output.select(slurm_output.parse_scontrol(proc.stdout), ids, "scontrol")

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
