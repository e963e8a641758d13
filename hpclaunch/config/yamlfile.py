"""The YAML dialect of profiles, recipes and --set values: YAML 1.1 (PyYAML, libyaml when present)
with two surprises removed.

- ``time: 04:00:00`` stays the string "04:00:00". Plain YAML 1.1 reads it as the base-60 integer
  14400, which would then be taken as 14400 minutes by Slurm.
- ``lr: 3e-4`` is the float 0.0003, as in YAML 1.2 and Python. Plain YAML 1.1 needs a dot (``3.0e-4``)
  and otherwise gives the string "3e-4".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from hpclaunch.errors import ConfigError

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class Loader(_BASE):
    """A safe loader (libyaml's parser when available) without base-60 numbers."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in _BASE.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver(
    _INT,
    re.compile(r"""^(?:[-+]?0b[0-1_]+
                   |[-+]?0[0-7_]+
                   |[-+]?(?:0|[1-9][0-9_]*)
                   |[-+]?0x[0-9a-fA-F_]+)$""", re.X),
    list("-+0123456789"),
)
Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                   |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def load(text: str) -> Any:
    """Parse YAML text (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader subclass)


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; syntax errors and non-mappings become ConfigErrors naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    try:
        data = load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML{where}: {problem}", file=str(path)) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping of keys to values, got {type(data).__name__}", file=str(path))
    return data
