"""The words for people that several faces print about a job's records: a recovery, a straggler, a start-up
timeline, node health, a W&B run, a span of seconds (3m12s), and the name of the span of a timeline that ends at
each of its phases (`SPANS`). The readers of those records own the words (hpclaunch/state/, jobs/); the faces take
them from here."""

from __future__ import annotations

from hpclaunch.jobs.sync import describe as wandb
from hpclaunch.jobs.view import describe_health as health
from hpclaunch.state.recoveries import line as recovery
from hpclaunch.state.slownodes import line as slow_node
from hpclaunch.state.stragglers import describe as straggler
from hpclaunch.state.stragglers import describe_stall as stall
from hpclaunch.state.timeline import SPANS, seconds
from hpclaunch.state.timeline import describe as timeline

__all__ = ["SPANS", "health", "recovery", "seconds", "slow_node", "stall", "straggler", "timeline", "wandb"]
