"""Metrics of a run (RUN_DIR/metrics/rank-0.jsonl): loading, a text summary, PNG plots (matplotlib,
imported only when a plot is drawn), the per-step loss comparison of two runs, and the checkpoints'
blocked and write times (checkpoints.py)."""
