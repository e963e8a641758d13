"""Strict frozen models and the translation of validation errors into ConfigErrors.

Every model forbids unknown keys. A validation error names the file, the dotted key and, for an
unknown key, the valid keys at that place.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from hpclaunch.config.rules import minutes_as_text
from hpclaunch.config.yamlfile import read_yaml
from hpclaunch.errors import ConfigError

__all__ = ["StrictModel", "SlurmTimeText", "read_yaml", "valid_keys", "validate"]


def _skip_pydantic_plugin_scan() -> None:
    """In the `hpclaunch` command only: pydantic looks for plugins by reading the entry points of every
    installed distribution the first time it builds a model (40-60 ms with the ML stack installed, a
    fifth of a dry-run). hpclaunch uses no plugins, so the command says there are none. Jobs and other
    programs that import hpclaunch keep pydantic's normal behaviour."""
    cli = sys.modules.get("hpclaunch.cli.main")
    if not getattr(cli, "RUNNING", False):
        return
    try:
        from pydantic.plugin import _loader
    except ImportError:
        return
    if getattr(_loader, "_plugins", False) is None:
        _loader._plugins = {}


_skip_pydantic_plugin_scan()


class StrictModel(BaseModel):
    # inf and nan are refused in every float field (lr=inf would train to nan and save it)
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, defer_build=True,
                              allow_inf_nan=False)


#: A Slurm time string (``90``, ``04:00:00``, ``2-00:00:00``); a bare integer counts minutes.
SlurmTimeText = Annotated[str, BeforeValidator(minutes_as_text)]


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as `Foo`, `Foo | None` or `dict[str, Foo]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _submodel(arg)
        if found is not None:
            return found
    return None


def valid_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at `loc` (the location of the unknown key's parent) inside `model`."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return []
        field = current.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            # a dict key or list index: stay on the same value type
            continue
        current = _submodel(field.annotation)
    return sorted(current.model_fields) if current is not None else []


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


Locator = Callable[[tuple[Any, ...]], str]


def validate(model: type[StrictModelT], data: Mapping[str, Any], *, file: str,
             locate: Locator | None = None) -> StrictModelT:
    """Validate `data` as `model`; raise one ConfigError that lists each problem with its place.

    `locate(loc)` may name the place a value came from (a preset, a --set flag) instead of `file`.
    """
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        lines = []
        errors = exc.errors(include_url=False)
        for err in errors[:5]:
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            origin = locate(loc) if locate else file
            key = _dotted(loc) or "(top level)"
            if err["type"] == "extra_forbidden":
                keys = valid_keys(model, loc[:-1])
                lines.append(f"{origin}: {key}: unknown key; valid keys: {', '.join(keys)}")
            elif err["type"] == "missing":
                lines.append(f"{origin}: {key}: required key is missing")
            else:
                msg = err["msg"].removeprefix("Value error, ")
                got = err.get("input")
                shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
                lines.append(f"{origin}: {key}: {msg}{shown}")
        if len(errors) > 5:
            lines.append(f"... and {len(errors) - 5} more")
        raise ConfigError("\n".join(lines)) from None


StrictModelT = typing.TypeVar("StrictModelT", bound=BaseModel)
