"""Reading a job's logs: finding the per-rank files of every restart (torchrun, DeepSpeed, msrun),
merging, tailing, grepping and following them, and diagnosing why a job failed."""

from hpclaunch.logs.files import LogFile, batch_outputs, find_rank_logs

__all__ = ["LogFile", "batch_outputs", "find_rank_logs"]
