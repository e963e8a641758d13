"""From a recipe and a profile to a queued job: resolve (the one place layers merge), preflight, render
(Jinja, StrictUndefined), the run directory, submission = dry-run + schedule, sweeps, provenance at submit.

May import: plan, assets, schedulers, launchers, config, state, core, errors. Never runtime."""
