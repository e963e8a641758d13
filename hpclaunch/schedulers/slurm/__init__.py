"""Slurm: every Slurm word lives here — #SBATCH options (options), sbatch/squeue/sacct/scontrol/scancel
(scheduler), their outputs parsed (output), pending reasons in words (reasons), sacct usage (accounting),
and `profiles init` discovery from scontrol (discover).

May import: schedulers.base, launchers, config, state, core, errors."""
