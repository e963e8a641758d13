"""LiBai's layout notation: ``1n1g``, ``2n8g`` = nodes x devices (processes) per node."""

from __future__ import annotations

import re
from typing import NamedTuple

from hpclaunch.errors import ConfigError

_LAYOUT = re.compile(r"^\s*(\d+)\s*n\s*(\d+)\s*g\s*$", re.IGNORECASE)


class Layout(NamedTuple):
    nodes: int
    gpus_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"


def parse_layout(text: str, *, where: str = "layout") -> Layout:
    m = _LAYOUT.match(str(text))
    if not m:
        raise ConfigError(f"invalid layout {text!r}: write NODESnGPUSg, e.g. 1n1g or 2n8g", key=where)
    nodes, gpus = int(m.group(1)), int(m.group(2))
    if nodes < 1 or gpus < 1:
        raise ConfigError(f"invalid layout {text!r}: nodes and GPUs per node must be at least 1", key=where)
    return Layout(nodes, gpus)
