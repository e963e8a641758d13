"""From a recipe and a profile to a queued job: resolve (the one place layers merge), preflight, render
(Jinja, StrictUndefined), the run directory, submission = dry-run + schedule, sweeps, provenance at submit,
and what recipes/gpt_mindspore's script honours (mindspore.py: the keys it would ignore are refused); submitting
over SSH from a laptop (overssh, remoteassets: docs/remote.md); the goodput a job is promised, from what earlier
runs of it measured (measured.py, RUN_DIR/promise.json).

May import: plan, assets, schedulers, launchers, config, state, core, errors. Never runtime."""
