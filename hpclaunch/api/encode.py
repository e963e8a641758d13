"""The one JSON encoder of hpclaunch's results: what every `--json` prints and what every MCP tool answers.

A result is turned into plain JSON data by `plain` (its own ``to_dict()``/``to_json()`` where it has one, a
dataclass field by field, a Path as its text), and versioned: every object at the top level, and every object of a
top-level list, carries "schema": SCHEMA first. Standard library only."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from pathlib import PurePath
from typing import Any

#: The version of every `--json` output's shape: raised when a key is renamed or removed or changes meaning
#: (adding a key keeps it). Lists stay lists, so that existing consumers keep working.
SCHEMA = 1


def plain(value: Any) -> Any:
    """`value` as JSON data: results by their to_dict()/to_json(), other dataclasses field by field (the fields
    named in their `hidden` class attribute left out), paths as text, tuples as lists."""
    for method in ("to_dict", "to_json"):
        if callable(getattr(value, method, None)):
            return plain(getattr(value, method)())
    if is_dataclass(value) and not isinstance(value, type):
        hidden = getattr(value, "hidden", ())
        return {f.name: plain(getattr(value, f.name)) for f in fields(value) if f.name not in hidden}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value


def versioned(data: Any) -> Any:
    """`data` with "schema": SCHEMA first in it (an object) or in each of its objects (a list)."""
    if isinstance(data, dict):
        return {"schema": SCHEMA, **data}
    if isinstance(data, list):
        return [versioned(item) if isinstance(item, dict) else item for item in data]
    return data


def encoded(value: Any) -> Any:
    """`value` as the versioned JSON data `--json` prints."""
    return versioned(plain(value))


def dumps(value: Any) -> str:
    """`value` as one compact line of JSON, keys in the order the code wrote them."""
    return json.dumps(encoded(value))
