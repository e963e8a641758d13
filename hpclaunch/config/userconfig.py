"""The user's own settings: ``$XDG_CONFIG_HOME/hpclaunch/config.yaml`` (default ``~/.config/hpclaunch/config.yaml``).

    default_profile: mycluster   # `submit`/`plan` without --profile use it

A missing file means no settings; a file that cannot be read, an unknown key or a bad value is a ConfigError
naming the file and the key (docs/profiles.md#your-defaults).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpclaunch.core.paths import config_home
from hpclaunch.errors import ConfigError

#: key -> what it means (the hint for an unknown key lists them)
KEYS = {"default_profile": "the profile used when --profile is not given"}


def config_file() -> Path:
    return config_home() / "config.yaml"


def load() -> dict[str, Any]:
    """The settings, checked; {} when there is no file."""
    path = config_file()
    if not path.is_file():
        return {}
    from hpclaunch.config.loader import read_yaml

    data = read_yaml(path)
    for key, value in data.items():
        if key not in KEYS:
            raise ConfigError("unknown setting", file=str(path), key=str(key),
                              hint="known settings: " + "; ".join(f"{k} ({v})" for k, v in KEYS.items()))
        if key == "default_profile" and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"expected a profile name, got {value!r}", file=str(path), key=key,
                              hint="e.g. `default_profile: guangzhou-a800` (see `hpclaunch profiles list`)")
    return data


def default_profile() -> str | None:
    value = load().get("default_profile")
    return value.strip() if isinstance(value, str) else None
