"""override_config.json (seed 000): model config keys replaced before the model is built.

Unlike seed 000, an unknown key is an error (not a warning), and so is a value whose type differs
from the current one. `torch_dtype` (alias `dtype`) is given by name: "bfloat16", "float16", ...
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpclaunch.errors import ConfigError

DTYPES = ("float16", "bfloat16", "float32", "float64")


def read_override(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(
            "the override config does not exist",
            file=str(p),
            hint="fix model.override_config in the recipe (a path relative to the recipe folder)",
        ) from e
    except ValueError as e:
        raise ConfigError(f"not valid JSON: {e}", file=str(p)) from e
    if not isinstance(data, dict):
        raise ConfigError("must be a JSON object of config keys", file=str(p))
    return data


def apply_overrides(config: Any, overrides: dict[str, Any], *, source: str) -> list[str]:
    """Set each key on a transformers config; returns 'key: old -> new' lines for the log."""
    import torch

    changes = []
    for key, value in overrides.items():
        name = "dtype" if key in ("torch_dtype", "dtype") else key
        if name == "dtype":
            if value not in DTYPES:
                raise ConfigError(
                    f"{value!r} is not a dtype name; use one of {', '.join(DTYPES)}", file=source, key=key
                )
            old = getattr(config, "dtype", None)
            config.dtype = getattr(torch, value)
            changes.append(f"{key}: {old} -> {value}")
            continue
        if not hasattr(config, name):
            valid = sorted(k for k in config.to_dict() if not k.startswith("_"))
            raise ConfigError(
                f"unknown key for a {type(config).__name__}; valid keys: {', '.join(valid)}",
                file=source,
                key=key,
            )
        old = getattr(config, name)
        if old is not None and not _same_type(old, value):
            raise ConfigError(
                f"{value!r} is a {type(value).__name__}, the config's value {old!r} is a "
                f"{type(old).__name__}",
                file=source,
                key=key,
            )
        setattr(config, name, value)
        changes.append(f"{key}: {old!r} -> {value!r}")
    return changes


def _same_type(old: Any, new: Any) -> bool:
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool)
    if isinstance(old, float) and isinstance(new, int):
        return True  # 0 for 0.0 is fine
    return type(old) is type(new) or (isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)))


def set_dropout(config: Any, p: float) -> None:
    """Every dropout probability of the config (the names differ between model families)."""
    for key, value in config.to_dict().items():
        if isinstance(value, float) and ("dropout" in key or key.endswith("_pdrop")):
            setattr(config, key, p)
