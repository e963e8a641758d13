"""Reading a job's logs: finding the per-rank files of every restart (torchrun, DeepSpeed, msrun),
merging, tailing, grepping and following them (streamed from a login node over SSH: remote), and diagnosing
why a job failed.

May import: schedulers, state, core, errors."""

from hpclaunch.state.runfiles import LogFile, RunFiles

__all__ = ["LogFile", "RunFiles"]
