"""Inside the job, on every node, standard library only: the node supervisor and hang watchdog
(supervise) and the ranks it starts without a launcher agent (ranks), per-rank progress records (progress)
in node-local memory and the one node record that publishes them (noderecord; in a multi-node launch sent to node
0's supervisor over TCP, which writes them all in one file: recordlink),
the usage sampler, rank start-up (rank_exec), the msrun worker wrapper and log tail, fault injection (inject),
blame after a failure, provenance at start, word when the job ends (notify), and node-local copies (nodestage: a
content-hashed tree, file or SquashFS image on a node's local scratch once, atomically; envstage: the packed Python
environment, relocated; elfpaths: compiled extensions' rpaths).

May import: logs (logs.diagnose, to blame a node), state, config, core, errors, and the standard
library. Never torch, MindSpore or runtime.train."""
