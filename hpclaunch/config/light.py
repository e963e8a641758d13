"""Light records: the config models without pydantic, for the hot path of `hpclaunch submit`.

Importing pydantic and building the profile, recipe and job-spec models costs about 90 ms, most of a
dry-run. The pydantic models (config/profile.py, config/recipe.py, jobspec.py) stay the one definition
of the schema and the only source of error messages. This module checks the same fields
(config/light_schema.py, generated from the models) with the same rules (config/rules.py) and is
deliberately narrower: it accepts only values that pydantic accepts unchanged or converts in one obvious
way (an int where a float goes). Anything else, an unknown key, a missing one, a value of another type,
a failed check, raises `Unsure`, and the caller validates again through pydantic, which gives the error
(or, for a value pydantic converts, the result). So a config either validates here to what pydantic
would give, field for field, or the pydantic path decides. tests/unit/test_light_models.py holds both
paths to that.

The records are frozen, expose the fields as attributes, and offer what the rest of hpclaunch uses of a
pydantic model: model_dump(mode=...), model_copy(update=...), and the methods of config/rules.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, cast

from hpclaunch.config import rules
from hpclaunch.config.light_schema import MODELS


class Unsure(Exception):
    """The light check cannot vouch for this value: validate through pydantic."""


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init__(self, **values: Any) -> None:
        for name in self._fields:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        return {f: _dump(getattr(self, f), mode == "json") for f in self._fields}

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Record:
        values = {f: getattr(self, f) for f in self._fields}
        values.update(update or {})
        return type(self)(**values)


def _dump(value: Any, as_json: bool) -> Any:
    if isinstance(value, Record):
        return value.model_dump(mode="json" if as_json else "python")
    if isinstance(value, dict):
        return {k: _dump(v, as_json) for k, v in value.items()}
    if isinstance(value, tuple):
        items = [_dump(v, as_json) for v in value]
        return items if as_json else tuple(items)
    if isinstance(value, list):
        return [_dump(v, as_json) for v in value]
    return value


# (model, validator name) -> the rule it runs, as in the pydantic models
_FIELD_RULES: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("Partition", "_time"): rules.slurm_time,
    ("Partition", "_devices"): rules.devices_per_node,
    ("Profile", "_env_strings"): rules.env_strings,
    ("ContainerConfig", "_env_strings"): rules.env_strings,
    ("WandbSpec", "_name"): rules.wandb_name,
    ("WandbSpec", "_tags"): rules.wandb_tags,
    ("ResourcesSpec", "_size"): rules.memory_size,
}
_MODEL_RULES: dict[tuple[str, str], Callable[[Any], None]] = {
    ("PythonEnv", "_one_env"): rules.one_python_env,
    ("Profile", "_consistent"): rules.consistent_profile,
    ("ContainerConfig", "_valid"): rules.container_config,
    ("ModelSpec", "_source"): rules.model_source,
    ("DatasetSpec", "_source"): rules.dataset_source,
    ("Recipe", "_launcher_sections"): rules.launcher_sections,
}
_MIXINS: dict[str, type] = {"Profile": rules.ProfileMethods, "JobSpec": rules.JobSpecMethods}


class _Model:
    """One model's checks, prepared from its row of MODELS."""

    def __init__(self, name: str, table: dict[str, Any]) -> None:
        self.name = name
        self.fields = table["fields"]
        self.names = frozenset(f[0] for f in self.fields)
        self.before: dict[str, Callable[[Any], Any]] = {}
        self.after: dict[str, Callable[[Any], Any]] = {}
        self.model_rules: list[Callable[[Any], None]] = []
        # a validator this module does not know: the model always goes through pydantic
        self.known = True
        for vname, mode, fields in table["field_validators"]:
            rule = _FIELD_RULES.get((name, vname))
            if rule is None or mode not in ("before", "after"):
                self.known = False
                continue
            for f in fields:
                (self.before if mode == "before" else self.after)[f] = rule
        for vname, mode in table["model_validators"]:
            model_rule = _MODEL_RULES.get((name, vname))
            if model_rule is None or mode != "after":
                self.known = False
                continue
            self.model_rules.append(model_rule)
        bases = (Record, _MIXINS[name]) if name in _MIXINS else (Record,)
        self.cls: type[Record] = type(name, bases, {"__slots__": tuple(f[0] for f in self.fields),
                                                    "_fields": tuple(f[0] for f in self.fields),
                                                    "__module__": __name__})

    def validate(self, data: Any) -> Record:
        if isinstance(data, self.cls):
            return data  # as pydantic: an instance is taken as it is
        if not self.known or type(data) is not dict or not self.names.issuperset(data):
            raise Unsure(self.name)
        values = {}
        for fname, kind, bounds, default in self.fields:
            if fname in data:
                value = data[fname]
            elif default[0] == "required":
                raise Unsure(f"{self.name}.{fname}")
            else:
                value = default[1]  # validate_default: defaults are checked as input
            if fname in self.before:
                value = _rule(self.before[fname], value)
            value = _check(kind, value)
            if bounds and value is not None:
                _bounds(value, bounds)
            if fname in self.after:
                value = _rule(self.after[fname], value)
            values[fname] = value
        record = self.cls(**values)
        for model_rule in self.model_rules:
            _rule(model_rule, record)
        return record


def _rule(rule: Callable[[Any], Any], value: Any) -> Any:
    try:
        return rule(value)
    except (ValueError, TypeError, AssertionError) as exc:
        raise Unsure(str(exc)) from None


def _bounds(value: Any, bounds: dict[str, Any]) -> None:
    for op, limit in bounds.items():
        ok = (value >= limit if op == "ge" else value > limit if op == "gt"
              else value <= limit if op == "le" else value < limit)
        if not ok:
            raise Unsure(f"{value!r} {op} {limit!r}")


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise Unsure("inf/nan")  # pydantic's JSON dump writes null for these: let it decide
    return value


def _plain(value: Any) -> Any:
    """A value for an `Any` field: only what YAML and JSON give and dump unchanged."""
    t = type(value)
    if value is None or t in (str, int, bool):
        return value
    if t is float:
        return _finite(value)
    if t is list:
        for v in value:
            _plain(v)
        return value
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise Unsure("dict key")
            _plain(v)
        return value
    raise Unsure(t.__name__)


def _check(kind: tuple, value: Any) -> Any:
    tag = kind[0]
    t = type(value)
    if tag == "str":
        if t is str:
            return value
    elif tag == "int":
        if t is int:
            return value
    elif tag == "float":
        if t is float:
            return _finite(value)
        if t is int:
            return float(value)
    elif tag == "bool":
        if t is bool:
            return value
    elif tag == "slurmtime":
        value = rules.minutes_as_text(value)
        if type(value) is str:
            return value
    elif tag == "literal":
        if t is str and value in kind[1]:
            return value
    elif tag == "opt":
        return None if value is None else _check(kind[1], value)
    elif tag == "any":
        return _plain(value)
    elif tag == "tuple":
        if t in (list, tuple):
            return tuple(_check(kind[1], v) for v in value)
    elif tag == "fixed":
        if t in (list, tuple) and len(value) == len(kind[1]):
            return tuple(_check(k, v) for k, v in zip(kind[1], value, strict=True))
    elif tag == "dict":
        if t is dict and all(type(k) is str for k in value):
            return {k: _check(kind[1], v) for k, v in value.items()}
    elif tag == "model":
        return _MODELS[kind[1]].validate(value)
    raise Unsure(f"{tag}: {t.__name__}")


_MODELS: dict[str, _Model] = {name: _Model(name, cast(dict[str, Any], table)) for name, table in MODELS.items()}


def validate(model: str, data: Any) -> Any:
    """The record for `data` as model `model` ("Profile", "Recipe", "JobSpec", ...); Unsure when only
    pydantic can tell."""
    return _MODELS[model].validate(data)


def record_class(model: str) -> type[Record]:
    return _MODELS[model].cls


def all_rules_known() -> dict[str, bool]:
    """Model name -> whether every validator of the pydantic model has its rule here (tests)."""
    return {name: m.known for name, m in _MODELS.items()}
