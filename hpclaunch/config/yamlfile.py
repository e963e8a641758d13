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


class UnreadableFile(ConfigError):
    """The file cannot be read as text at all (permissions, not UTF-8): listings skip it with a warning."""

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


#: How many values aliases may add to a document beyond those written out: a few anchors for shared
#: partitions are fine; an "alias bomb" (aliases of aliases, each doubling the document) is refused before
#: anything walks the expanded data.
MAX_ALIAS_EXPANSION = 10_000


class Loader(_BASE):
    """A safe loader (libyaml's parser when available) without base-60 numbers, with duplicate keys
    refused and alias expansion bounded."""

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return self.construct_document(node)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"duplicate key {key_node.value!r} (each key may appear once in a mapping)",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_MERGE = "tag:yaml.org,2002:merge"


def _check_expansion(root: Any) -> None:
    """Refuse a document whose aliases expand it by more than MAX_ALIAS_EXPANSION values. Counts the
    expanded size of each node once (memoised by identity), so it costs one pass over the nodes."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # entered, children not yet sized: seeing one again is a cycle
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1
            continue
        children = ([v for pair in node.value for v in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if children_done:
            sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) for c in children)
            open_nodes.discard(id(node))
            continue
        if id(node) in open_nodes:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a value that contains it (a value without end); write the "
                "values out instead", node.start_mark)
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    expanded, written = sizes[id(root)], len(sizes)
    if expanded - written > MAX_ALIAS_EXPANSION:
        raise yaml.composer.ComposerError(
            None, None, f"aliases expand this document to {expanded} values from {written} written (more than "
            f"{MAX_ALIAS_EXPANSION} added by aliases); write the values out, or use fewer nested aliases",
            root.start_mark)


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
    """Parse YAML text (raises yaml.YAMLError; a number too long to convert is one too)."""
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader subclass)
    except ValueError as exc:  # int('9' * 5000): Python's limit on digits
        raise yaml.YAMLError(f"a number too long to read ({str(exc).split(';')[0]})") from None
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; syntax errors and non-mappings become ConfigErrors naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise UnreadableFile(f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} on line {line} cannot be "
                             "decoded", file=str(path), hint="save the file as UTF-8") from None
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
