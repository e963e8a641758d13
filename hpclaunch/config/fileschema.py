"""JSON Schemas of profile and recipe files, generated from the models (msgspec.json.schema;
docs/profiles.md#editor-support).

The models stay the one definition; this module only says what a *file* may hold beyond a model:
`name` may be left out (it defaults to the file or folder name), a recipe file also has `presets` (partial
recipes merged over it) and `default_preset`, and values the models convert before validating (a Slurm time
given as minutes, a number in `env`: the "before" functions of hpclaunch/config/base.py) are allowed as the
file writes them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
from msgspec import inspect as mi

from hpclaunch.config import rules
from hpclaunch.errors import ConfigError

DIALECT = "https://json-schema.org/draft/2020-12/schema"
KINDS = ("profile", "recipe")

_SCALAR = {"type": ["string", "number", "boolean"]}


def _befores(t: Any) -> set[Any]:
    """The "before" conversions anywhere in a field's type (through metadata and unions, not into models)."""
    if isinstance(t, mi.Metadata):
        found = _befores(t.type)
        if t.extra and "before" in t.extra:
            found.add(t.extra["before"])
        return found
    if isinstance(t, mi.UnionType):
        return set().union(*(_befores(m) for m in t.types))
    return set()


def _structs(t: Any, found: dict[str, mi.StructType]) -> dict[str, mi.StructType]:
    """Every model inside type `t`, by class name (the names msgspec gives in $defs)."""
    if isinstance(t, mi.StructType):
        if t.cls.__name__ not in found:
            found[t.cls.__name__] = t
            for f in t.fields:
                _structs(f.type, found)
    elif isinstance(t, mi.Metadata):
        _structs(t.type, found)
    elif isinstance(t, mi.UnionType):
        for m in t.types:
            _structs(m, found)
    elif isinstance(t, mi.DictType):
        _structs(t.value_type, found)
    elif isinstance(t, mi.VarTupleType):
        _structs(t.item_type, found)
    return found


def _also(prop: dict[str, Any], spelling: dict[str, Any]) -> None:
    """Allow `spelling` beside what the property's schema allows."""
    if "anyOf" in prop:
        prop["anyOf"].insert(0, spelling)
    else:
        kept = {k: prop.pop(k) for k in ("type", "items") if k in prop}
        prop["anyOf"] = [kept, spelling]


def _allow_file_spellings(defs: dict[str, Any], models: dict[str, mi.StructType]) -> None:
    for name, info in models.items():
        props = defs[name].get("properties", {})
        for f in info.fields:
            befores = _befores(f.type)
            prop = props[f.name]
            if rules.minutes_as_text in befores:
                _also(prop, {"type": "integer", "minimum": 1, "description": "minutes"})
                prop.setdefault("description", "a Slurm time: MINUTES, HH:MM:SS or D-HH:MM:SS")
            if rules.word_list in befores:
                _also(prop, {"type": "string", "description": "one word, or several comma-separated"})
            if rules.env_strings in befores:
                prop["additionalProperties"] = dict(_SCALAR)


def _partial(node: dict[str, Any]) -> dict[str, Any]:
    """A copy of an object schema with nothing required (a preset gives only the keys it changes)."""
    out = copy.deepcopy(node)
    out.pop("required", None)
    out.pop("$defs", None)
    out.pop("title", None)
    return out


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a `kind` file: "profile" or "recipe"."""
    if kind == "profile":
        from hpclaunch.config.profile import Profile as model
        title, about = "hpclaunch cluster profile", "A cluster profile (docs/profiles.md)."
    elif kind == "recipe":
        from hpclaunch.config.recipe import Recipe as model  # type: ignore[assignment]
        title, about = "hpclaunch recipe", "A recipe.yaml (docs/recipes.md)."
    else:
        raise ConfigError(f"no schema for {kind!r}", hint=f"one of: {', '.join(KINDS)}")
    made = msgspec.json.schema(model)
    defs: dict[str, Any] = made["$defs"]
    _allow_file_spellings(defs, _structs(mi.type_info(model), {}))
    out: dict[str, Any] = defs.pop(model.__name__)
    if defs:
        out["$defs"] = defs
    out["required"] = [k for k in out.get("required", []) if k != "name"]
    out["properties"]["name"]["description"] = f"default: the {kind} file's {'name' if kind == 'profile' else 'folder'}"
    if kind == "recipe":
        out["properties"]["presets"] = {
            "type": "object", "description": "named partial recipes merged over this one (--preset NAME)",
            "additionalProperties": _partial(out)}
        out["properties"]["default_preset"] = {"type": "string", "description": "the preset used without --preset"}
    out = {"$schema": DIALECT, "title": title, "description": about,
           **{k: v for k, v in out.items() if k not in ("title", "description")}}
    return out


def schema_text(kind: str) -> str:
    """`schema(kind)` as the text of a .schema.json file."""
    return json.dumps(schema(kind), indent=2) + "\n"
