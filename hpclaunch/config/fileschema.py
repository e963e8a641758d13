"""JSON Schemas of profile and recipe files, generated from the pydantic models (docs/profiles.md#editor-support).

The models stay the one definition; this module only says what a *file* may hold beyond a model:
`name` may be left out (it defaults to the file or folder name), a recipe file also has `presets` (partial
recipes merged over it) and `default_preset`, and values the models convert before validating (a Slurm time
given as minutes, a number in `env`) are allowed as the file writes them.
"""

from __future__ import annotations

import copy
import json
import typing
from typing import Any

from pydantic import BaseModel, BeforeValidator

from hpclaunch.config import rules
from hpclaunch.errors import ConfigError

DIALECT = "https://json-schema.org/draft/2020-12/schema"
KINDS = ("profile", "recipe")

_SCALAR = {"type": ["string", "number", "boolean"]}


def _models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """`model` and every model inside its fields, by class name (the names pydantic gives in $defs)."""
    from hpclaunch.config.base import _submodel

    found = {model.__name__: model}
    for field in model.model_fields.values():
        sub = _submodel(field.annotation)
        if sub is not None and sub.__name__ not in found:
            found.update(_models(sub))
    return found


def _takes_minutes(metadata: Any) -> bool:
    """Whether a field's (or a union member's) metadata holds SlurmTimeText's conversion."""
    return any(isinstance(m, BeforeValidator) and m.func is rules.minutes_as_text for m in metadata)


def _before_converted(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    """(Slurm time fields that take minutes as a number, env-like fields whose values may be numbers)."""
    times = {name for name, f in model.model_fields.items()
             if _takes_minutes(f.metadata) or any(_takes_minutes(getattr(arg, "__metadata__", ()))
                                                  for arg in typing.get_args(f.annotation))}
    envs: set[str] = set()
    for dec in model.__pydantic_decorators__.field_validators.values():
        if dec.info.mode == "before" and dec.cls_var_name == "_env_strings":
            envs.update(dec.info.fields)
    return times, envs


def _allow_file_spellings(schema: dict[str, Any], models: dict[str, type[BaseModel]]) -> None:
    for name, model in models.items():
        node = schema if name == next(iter(models)) else schema.get("$defs", {}).get(name)
        if node is None:
            continue
        times, envs = _before_converted(model)
        props = node.get("properties", {})
        for key in times & set(props):
            prop = props[key]
            minutes = {"type": "integer", "minimum": 1, "description": "minutes"}
            if "anyOf" in prop:
                prop["anyOf"].insert(0, minutes)
            else:
                kept = {k: prop.pop(k) for k in ("type",) if k in prop}
                prop["anyOf"] = [kept, minutes]
            prop.setdefault("description", "a Slurm time: MINUTES, HH:MM:SS or D-HH:MM:SS")
        for key in envs & set(props):
            props[key]["additionalProperties"] = dict(_SCALAR)


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
    out: dict[str, Any] = model.model_json_schema(mode="validation")
    _allow_file_spellings(out, _models(model))
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
