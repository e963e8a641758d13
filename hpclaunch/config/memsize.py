"""Memory sizes as Slurm writes them (``64G``, ``4000M``: K, M, G or T, M without a unit; 1G = 1024M) <-> MiB."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^([1-9][0-9]*)([KMGT]?)$", re.IGNORECASE)
_KIB = {"K": 1, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}


def parse_size(text: str) -> int:
    """MiB in a Slurm memory size, rounded up: ``64G`` -> 65536, ``512K`` -> 1. Raises ValueError for anything
    else (``0``, ``64GB``, ``1.5G``)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise ValueError("not a memory size such as 64G or 4000M (a whole number above 0 with K, M, G or T; M "
                         "without a unit)")
    kib = int(m[1]) * _KIB[(m[2] or "M").upper()]
    return -(-kib // 1024)


def format_size(mib: int) -> str:
    """What sbatch --mem takes: 65536 -> ``64G``, 1500 -> ``1500M``, 0 -> ``0`` (all of the node's memory)."""
    if mib == 0:
        return "0"
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"
