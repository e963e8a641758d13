"""Metrics of a run (RUN_DIR/metrics/rank-0.jsonl): loading, a text summary, PNG plots (matplotlib,
imported only when a plot is drawn), the per-step loss comparison of two runs, the checkpoints'
blocked and write times (checkpoints.py), and the goodput ledger: how much of the allocated node time advanced the
model and where the rest went (goodput.py, from the run directory's timeline, checkpoints and progress records).

May import: logs, schedulers, state, core, errors."""
