"""JobSpec + launcher -> the job script. Pure and deterministic."""
