"""A job after submit: its state (registry + scheduler), the live watch model, cancel, resume (a stopped job
again from its checkpoint), clean, export (checkpoint -> Hugging Face folder), W&B sync; the local copy of a
run directory on a login node (remote, docs/remote.md).

May import: report, logs, submission, schedulers, config, state, core, errors. Never runtime, never cli."""
