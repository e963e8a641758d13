"""Inside the job, on every node, standard library only: the node supervisor and hang watchdog
(supervise) and the ranks it starts without a launcher agent (ranks), per-rank progress records (progress),
the usage sampler, rank start-up (rank_exec), the msrun worker wrapper and log tail, fault injection (inject),
blame after a failure, and provenance at start.

May import: state, config, core, errors and the standard library. Never torch, MindSpore or runtime.train."""
