"""The grammar of ``HPCLAUNCH_INJECT=KIND:RANK:STEP`` (docs/troubleshooting.md): checked at submit (resolve),
read in the job (hpclaunch/runtime/node/inject.py). Standard library only."""

from __future__ import annotations

import re
from typing import NamedTuple

ENV = "HPCLAUNCH_INJECT"
KINDS = ("hang", "crash", "kill", "slow")
PATTERN = re.compile(r"^(hang|crash|kill|slow):(\d{1,6}):(\d{1,9})$")


class Fault(NamedTuple):
    """One fault to rehearse: rank `rank` after optimizer step `step` (`hang:1:5`)."""

    kind: str
    rank: int
    step: int

    @classmethod
    def parse(cls, text: str) -> Fault:
        m = PATTERN.match(text.strip())
        if not m:
            raise ValueError(f"{ENV}={text!r} is not KIND:RANK:STEP with KIND one of {', '.join(KINDS)} "
                             "(e.g. hang:1:5)")
        return cls(m.group(1), int(m.group(2)), int(m.group(3)))
