"""Slurm time strings (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``) <-> seconds."""

from __future__ import annotations

import re

_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time(text: str | int) -> int:
    """Seconds in a Slurm time limit. Raises ValueError for anything else (including UNLIMITED)."""
    s = str(text).strip()
    m = _DAYS.match(s)
    if m:
        d, h, mi, se = (int(x) if x else 0 for x in m.groups())
        return ((d * 24 + h) * 60 + mi) * 60 + se
    parts = s.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise ValueError(f"not a Slurm time: {text!r} (use MM, HH:MM:SS or D-HH:MM:SS)")
    nums = [int(p) for p in parts]
    if len(nums) == 1:
        return nums[0] * 60
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return (nums[0] * 60 + nums[1]) * 60 + nums[2]


def format_time(seconds: int) -> str:
    """``D-HH:MM:SS`` (or ``HH:MM:SS`` under a day): what sbatch --time accepts."""
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"
