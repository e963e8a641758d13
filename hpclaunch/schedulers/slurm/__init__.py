"""Slurm: every Slurm word lives here — #SBATCH options (options), sbatch/squeue/sacct/scontrol/scancel
(scheduler), their outputs parsed (output), pending reasons in words (reasons), sacct usage (accounting),
and `profiles init` discovery from scontrol (discover).

May import: schedulers.base, launchers, config, state, core, errors."""

from hpclaunch.core.cmd import missing_hint

_LOGIN = "is this a Slurm login node?"
missing_hint({"sbatch": f"{_LOGIN} Load the Slurm module or use a profile with `scheduler: local`",
              **{program: _LOGIN for program in ("squeue", "sacct", "scontrol", "scancel", "sinfo")}})
