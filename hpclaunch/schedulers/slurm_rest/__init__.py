"""slurm-rest: Slurm through slurmrestd's REST API with a JWT, for a submitting machine without Slurm's commands;
OpenAPI v0.0.38 (Slurm 22.05-23.11) and v0.0.40-v0.0.45 (23.11-26.05), the newest the slurmrestd serves. The job
script is the Slurm scheduler's; the REST settings and the HTTP request (connection), the version spoken (versions),
the #SBATCH lines as the job description (jobdesc; typed for v0.0.40 on), the answers read (answers), the scheduler
(scheduler). docs/profiles.md says how to set it up.

May import: schedulers.slurm, schedulers.base, config, state, core, errors."""
