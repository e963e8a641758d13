"""The grammar of ``HPCLAUNCH_INJECT=KIND:RANK:STEP[,KIND:RANK:STEP...]`` (docs/troubleshooting.md): checked at
submit (resolve), read in the job (hpclaunch/runtime/node/inject.py). Standard library only."""

from __future__ import annotations

import re
from typing import NamedTuple

ENV = "HPCLAUNCH_INJECT"
KINDS = ("hang", "crash", "kill", "slow", "nodefail", "sick")
BEFORE_START = frozenset({"sick"})  # faults of the health check before step 0: RANK names a node of the allocation
PATTERN = re.compile(r"^(hang|crash|kill|slow|nodefail|sick):(\d{1,6}):(\d{1,9})$")
MAX_FAULTS = 32


class Fault(NamedTuple):
    """One fault to rehearse: rank `rank` after optimizer step `step` (`hang:1:5`)."""

    kind: str
    rank: int
    step: int

    @classmethod
    def parse(cls, text: str) -> Fault:
        m = PATTERN.match(text.strip())
        if not m:
            raise ValueError(f"{ENV}: {text.strip()[:40]!r} is not KIND:RANK:STEP with KIND one of {', '.join(KINDS)} "
                             "(e.g. hang:1:5)")
        return cls(m.group(1), int(m.group(2)), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.kind}:{self.rank}:{self.step}"


def parse_list(text: str) -> tuple[Fault, ...]:
    """``kill:1:20,hang:1:60,nodefail:0:100``: the faults in the order given, each firing once across restarts.
    Empty items, too many faults and the same fault twice are refused (ValueError)."""
    items = [item.strip() for item in text.split(",")]
    if len(items) > MAX_FAULTS:
        raise ValueError(f"{ENV}: {len(items)} faults; at most {MAX_FAULTS}")
    faults = tuple(Fault.parse(item) for item in items)
    seen: set[Fault] = set()
    for fault in faults:
        if fault in seen:
            raise ValueError(f"{ENV}: {fault} is given twice (each fault fires once; give it once)")
        seen.add(fault)
    return faults
