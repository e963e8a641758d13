"""Strict frozen models (msgspec Structs) and their validation, which reports every problem with its place.

Every model forbids unknown keys. `validate` walks the data field by field along msgspec's type information
(msgspec.inspect), recursing into nested models, so that one ConfigError lists each unknown key (with the valid
keys at that place), missing key, value of the wrong type and failed check, each with the file and the dotted
key (msgspec.convert would stop at the first). It accepts what the models accepted when they were pydantic's
(lax: "8" for an int, "yes" for a bool, an int for a float; never inf or nan) and words the errors the same way.

A field's metadata may name two functions (`Meta(extra=...)`): "before" converts the raw value before its type
is checked (a Slurm time given as minutes, numbers in `env`), "check" tests the typed value and raises
ValueError with the message the user sees. Checks that span fields are each model's `__post_init__`.
"""

from __future__ import annotations

import math
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from hpclaunch.config.rules import FieldError, minutes_as_text, one_of
from hpclaunch.errors import ConfigError


def _import_msgspec() -> None:
    """msgspec imports typing_extensions where it is installed, only for what `typing` has itself on Python 3.11
    (get_type_hints with extras; Required/NotRequired, for TypedDicts, which no model uses); that import is ~8 ms
    of CPU, a tenth of a dry-run. So msgspec is imported as where typing_extensions is missing; anything that
    imports typing_extensions afterwards gets it as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


_import_msgspec()

import msgspec  # noqa: E402
from msgspec import Meta  # noqa: E402
from msgspec import inspect as mi  # noqa: E402

__all__ = ["StrictModel", "SlurmTimeText", "Meta", "described", "dump", "replace", "validate"]


class StrictModel(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The base of every config model: frozen, unknown keys forbidden. (msgspec does not pass kw_only on to
    subclasses: each model says `kw_only=True` itself, so that required fields may follow optional ones, and
    `frozen=True`, which it does inherit, for type checkers.)"""


ModelT = TypeVar("ModelT", bound=StrictModel)

#: A Slurm time string (``90``, ``04:00:00``, ``2-00:00:00``); a bare integer counts minutes.
SlurmTimeText = Annotated[str, Meta(extra={"before": minutes_as_text})]


def dump(obj: Any) -> Any:
    """A model as JSON-compatible data: dicts, lists, text, numbers, booleans and None (model_dump(mode="json"))."""
    return msgspec.json.decode(msgspec.json.encode(obj))


def replace(obj: ModelT, **changes: Any) -> ModelT:
    """A copy of the frozen `obj` with `changes`: values of the fields' types (not converted nor type-checked; the
    model's `__post_init__` checks run again)."""
    return msgspec.structs.replace(obj, **changes)


Locator = Callable[[tuple[Any, ...]], str]
_Problem = tuple[tuple[Any, ...], str, Any]  # (place, message, the value or _NONE)

_NONE = object()  # no value to show beside a message
_BAD = object()  # the result of a value that failed
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_FIELDS: dict[type, tuple[tuple[str, Any, bool], ...]] = {}
_PLAIN = {str: mi.StrType(), int: mi.IntType(), float: mi.FloatType(), bool: mi.BoolType(),
          type(None): mi.NoneType(), Any: mi.AnyType()}


def _fields(model: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type, required) of each field of `model`, the type as msgspec.inspect describes it; a model inside is
    its class, described when the walk reaches it. (Made from msgspec.structs.fields, class by class:
    msgspec.inspect.type_info would describe every model inside at once, most of them never reached.)"""
    found = _FIELDS.get(model)
    if found is None:
        found = _FIELDS[model] = tuple((f.name, described(f.type), f.required) for f in msgspec.structs.fields(model))
    return found


def described(ann: Any) -> Any:
    """An annotation as msgspec.inspect's types (Metadata, UnionType, IntType(ge=...), ...); a model stays its
    class. Literal values keep the order the model gives them (msgspec.inspect sorts them)."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is Annotated:
        inner = described(args[0])
        bounds: dict[str, Any] = {}
        schema: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for meta in ann.__metadata__:
            bounds.update({k: v for k in ("ge", "gt", "le", "lt") if (v := getattr(meta, k)) is not None})
            if meta.description is not None:
                schema["description"] = meta.description
            extra.update(meta.extra or {})
        if bounds:
            inner = msgspec.structs.replace(inner, **bounds)
        return mi.Metadata(type=inner, extra_json_schema=schema or None, extra=extra or None) if schema or extra \
            else inner
    if origin in (typing.Union, types.UnionType):
        return mi.UnionType(types=tuple(described(a) for a in args))
    if origin is typing.Literal:
        return mi.LiteralType(values=args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return mi.VarTupleType(item_type=described(args[0]))
        return mi.TupleType(item_types=tuple(described(a) for a in args))
    if origin is dict:
        return mi.DictType(key_type=described(args[0]), value_type=described(args[1]))
    if isinstance(ann, type) and issubclass(ann, msgspec.Struct):
        return ann
    if ann in _PLAIN:
        return _PLAIN[ann]
    raise TypeError(f"no validation for {ann!r}")  # a model uses a type this module does not know yet


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _bounds(t: mi.IntType | mi.FloatType, value: float, raw: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    """`value` (converted from `raw`, the input shown in a message) within the type's bounds."""
    for limit, ok, words in ((t.ge, lambda v, lim: v >= lim, "greater than or equal to"),
                             (t.gt, lambda v, lim: v > lim, "greater than"),
                             (t.le, lambda v, lim: v <= lim, "less than or equal to"),
                             (t.lt, lambda v, lim: v < lim, "less than")):
        if limit is not None and not ok(value, limit):
            out.append((loc, f"Input should be {words} {_number(limit)}", raw))
            return _BAD
    return value


def _int(t: mi.IntType, value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    raw, kind = value, type(value)
    if kind is float and value.is_integer():
        value = int(value)
    elif kind is str:
        try:
            number = float(value.strip()) if "." in value else int(value.strip())
        except ValueError:
            number = None
        if number is None or (isinstance(number, float) and not number.is_integer()) or "e" in value.lower():
            out.append((loc, "Input should be a valid integer, unable to parse string as an integer", value))
            return _BAD
        value = int(number)
    elif kind is float:
        message = ("Input should be a finite number" if not math.isfinite(value)
                   else "Input should be a valid integer, got a number with a fractional part")
        out.append((loc, message, value))
        return _BAD
    elif kind is bool:
        value = int(value)
    elif kind is not int:
        out.append((loc, "Input should be a valid integer", value))
        return _BAD
    return _bounds(t, value, raw, loc, out)


def _float(t: mi.FloatType, value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    kind = type(value)
    if kind is str:
        try:
            number = float(value.strip())
        except ValueError:
            out.append((loc, "Input should be a valid number, unable to parse string as a number", value))
            return _BAD
    elif kind in (int, float, bool):
        number = float(value)
    else:
        out.append((loc, "Input should be a valid number", value))
        return _BAD
    if not math.isfinite(number):
        out.append((loc, "Input should be a finite number", value))
        return _BAD
    return _bounds(t, number, value, loc, out)


def _bool(value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    kind = type(value)
    if kind is bool:
        return value
    if kind is str and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if kind in (int, float) and value in (0, 1):
        return bool(value)
    out.append((loc, "Input should be a valid boolean" + (", unable to interpret input" if kind in (int, str) else ""),
                value))
    return _BAD


def _value(t: Any, value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    """`value` checked (and converted) as type `t`; _BAD after appending its problems to `out`."""
    kind = type(t)
    if kind is mi.StrType:
        if type(value) is str and "\x00" not in value:
            return value
        out.append((loc, "a NUL byte (\\x00) cannot be part of a name, a path or a command line: remove it"
                    if type(value) is str else "Input should be a valid string", value))
        return _BAD
    if kind is mi.IntType:
        return _int(t, value, loc, out)
    if kind is mi.FloatType:
        return _float(t, value, loc, out)
    if kind is mi.BoolType:
        return _bool(value, loc, out)
    if kind is mi.Metadata:
        return _metadata(t, value, loc, out)
    if kind is mi.UnionType:
        if value is None and any(type(m) is mi.NoneType for m in t.types):
            return None
        members = [m for m in t.types if type(m) is not mi.NoneType]
        for member in members[:-1]:
            tried: list[_Problem] = []
            result = _value(member, value, loc, tried)
            if not tried:
                return result
        return _value(members[-1], value, loc, out)
    if isinstance(t, type):  # a model
        return _struct(t, value, loc, out)
    if kind is mi.LiteralType:
        if value in t.values and type(value) is type(t.values[0]):
            return value
        out.append((loc, f"Input should be {one_of(t.values)}", value))
        return _BAD
    if kind is mi.VarTupleType or kind is mi.TupleType:
        return _tuple(t, value, loc, out)
    if kind is mi.DictType:
        return _dict(t, value, loc, out)
    if kind is mi.AnyType:
        return value
    if kind is mi.NoneType:
        if value is None:
            return None
        out.append((loc, "Input should be None", value))
        return _BAD
    raise TypeError(f"no validation for {t!r}")


def _metadata(t: mi.Metadata, value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    extra = t.extra or {}
    before, check, raw = extra.get("before"), extra.get("check"), value
    if before is not None:
        try:
            value = before(value)
        except ValueError as exc:
            out.append((loc, str(exc), value))
            return _BAD
    result = _value(t.type, value, loc, out)
    if check is not None and result is not _BAD and result is not None:
        try:
            check(result)
        except ValueError as exc:
            out.append((loc, str(exc), raw))
            return _BAD
    return result


def _tuple(t: mi.VarTupleType | mi.TupleType, value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    if type(value) not in (list, tuple, set, frozenset):
        out.append((loc, "Input should be a valid tuple", value))
        return _BAD
    items = list(value)
    if isinstance(t, mi.VarTupleType):
        types = [t.item_type] * len(items)
    else:
        types = list(t.item_types)
        if len(items) > len(types):
            out.append((loc, f"Tuple should have at most {len(types)} items after validation, not {len(items)}",
                        value))
            return _BAD
        if len(items) < len(types):
            out.extend(((*loc, i), "required key is missing", _NONE) for i in range(len(items), len(types)))
            return _BAD
    before = len(out)
    result = tuple(_value(item_type, item, (*loc, i), out) for i, (item_type, item)
                   in enumerate(zip(types, items, strict=True)))
    return _BAD if len(out) > before else result


def _dict(t: mi.DictType, value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    if type(value) is not dict:
        out.append((loc, "Input should be a valid dictionary", value))
        return _BAD
    before = len(out)
    result = {}
    for key, item in value.items():
        checked_key = _value(t.key_type, key, (*loc, key, "[key]"), out)
        result[checked_key] = _value(t.value_type, item, (*loc, key), out)
    return _BAD if len(out) > before else result


def _struct(cls: type[msgspec.Struct], value: Any, loc: tuple[Any, ...], out: list[_Problem]) -> Any:
    if isinstance(value, cls):
        return value  # an instance is taken as it is
    if type(value) is not dict:
        out.append((loc, f"Input should be a valid dictionary or instance of {cls.__name__}", value))
        return _BAD
    before = len(out)
    values = {}
    for name, kind, required in _fields(cls):
        if name in value:
            values[name] = _value(kind, value[name], (*loc, name), out)
        elif required:
            out.append(((*loc, name), "required key is missing", _NONE))
    known = cls.__struct_fields__
    for key in value:
        if key not in known:
            out.append(((*loc, key), f"unknown key; valid keys: {', '.join(sorted(known))}", _NONE))
    if len(out) > before:
        return _BAD
    try:
        return cls(**values)
    except ValueError as exc:  # a check across fields (__post_init__), maybe blaming one of them
        out.append(((*loc, *exc.key.split(".")) if isinstance(exc, FieldError) else loc, str(exc), _NONE))
        return _BAD


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def problems(model: type[StrictModel], data: Any) -> tuple[Any, list[_Problem]]:
    """(the model made of `data`, or _BAD; every problem found on the way)."""
    out: list[_Problem] = []
    return _struct(model, data, (), out), out


def validate(model: type[ModelT], data: Mapping[str, Any], *, file: str, locate: Locator | None = None) -> ModelT:
    """Validate `data` as `model`; raise one ConfigError that lists each problem with its place.

    `locate(loc)` may name the place a value came from (a preset, a --set flag) instead of `file`.
    """
    result, found = problems(model, dict(data))
    if not found:
        return result
    lines = []
    for loc, message, got in found[:5]:
        origin = locate(loc) if locate else file
        shown = "" if got is _NONE or isinstance(got, dict | list) or got is None else f" (got {got!r})"
        lines.append(f"{origin}: {_dotted(loc) or '(top level)'}: {message}{shown}")
    if len(found) > 5:
        lines.append(f"... and {len(found) - 5} more")
    raise ConfigError("\n".join(lines))
