"""slurm-rest: Slurm through slurmrestd's REST API (OpenAPI v0.0.38, Slurm 22.05) with a JWT, for a submitting
machine without Slurm's commands. The job script is the Slurm scheduler's; the REST settings and the HTTP
request (connection), the #SBATCH lines as the job description (jobdesc), the answers read (answers), the
scheduler (scheduler). docs/profiles.md says how to set it up.

May import: schedulers.slurm, schedulers.base, config, state, core, errors."""
