"""Find and load cluster profiles and recipes by name or path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.core.paths import expand, search_dirs
from hpclaunch.errors import ConfigError, NotFoundError


def read_yaml(path: Path) -> dict[str, Any]:
    """A profile's or recipe's YAML, from the content-addressed cache when this exact file was read
    before (no PyYAML import then); else parsed by hpclaunch.config.yamlfile (and cached)."""
    from hpclaunch.core import cache

    try:
        raw = path.read_bytes()
    except OSError:
        raw = None
    name = cache.key("yaml", cache.code_stamp("config/yamlfile.py"), raw) if raw is not None else None
    if name is not None:
        hit = cache.get("yaml", name)
        if isinstance(hit, dict):
            return hit
    from hpclaunch.config import yamlfile

    data = yamlfile.read_yaml(path)
    if name is not None and cache.exact_json(data):
        cache.put("yaml", name, data)
    return data

if TYPE_CHECKING:
    from hpclaunch.config.profile import Profile

RECIPE_FILE = "recipe.yaml"


def _looks_like_path(ref: str) -> bool:
    return "/" in ref or ref.endswith((".yaml", ".yml")) or ref in (".", "..")


def _user_path(ref: str, kind: str) -> Path:
    """A path the user gave for a `kind`, expanded; too long a name is a ConfigError, not an OSError."""
    if len(ref) > 4096 or any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in ref.split("/")):
        raise ConfigError(f"{ref[:60]!r}... is too long for a {kind} name or path (a file name has at most "
                          "255 bytes)", hint=f"pass the {kind} by its name or a shorter path")
    return expand(ref, kind)


def profile_files() -> dict[str, Path]:
    """Profile name -> file, user folders taking precedence over bundled ones."""
    found: dict[str, Path] = {}
    for folder in search_dirs("cluster_profiles"):
        for f in sorted(folder.glob("*.yaml")):
            found.setdefault(f.stem, f)
    return found


def find_profile(ref: str) -> Path:
    if _looks_like_path(ref):
        path = _user_path(ref, "profile")
        if path.is_file():
            return path
        raise NotFoundError("profile file", ref)
    files = profile_files()
    if ref not in files:
        raise NotFoundError("profile", ref, files,
                            hint="add your own as ~/.config/hpclaunch/cluster_profiles/NAME.yaml")
    return files[ref]


def read_profile(ref: str) -> tuple[Path, dict[str, Any]]:
    """(file, raw data) of a profile, before validation."""
    path = find_profile(ref)
    data = read_yaml(path)
    data.setdefault("name", path.stem)
    if isinstance(data.get("templates"), str):
        # a profile's template folder is relative to the profile file
        data["templates"] = str((path.parent / data["templates"]).expanduser().resolve())
    return path, data


def load_profile(ref: str) -> Profile:
    from hpclaunch.config.base import validate
    from hpclaunch.config.profile import Profile

    path, data = read_profile(ref)
    return validate(Profile, data, file=str(path))


def recipe_dirs() -> dict[str, Path]:
    """Recipe name -> folder, user folders taking precedence over bundled ones."""
    found: dict[str, Path] = {}
    for folder in search_dirs("recipes"):
        for f in sorted(folder.glob(f"*/{RECIPE_FILE}")):
            found.setdefault(f.parent.name, f.parent)
    return found


@dataclass(frozen=True)
class RecipeSource:
    """A recipe's raw YAML and where it lives (validation happens in resolve, after presets merge)."""

    dir: Path
    file: Path
    data: dict[str, Any]


def find_recipe(ref: str) -> Path:
    """The recipe folder for a path (folder or recipe.yaml) or a name (``gpt2``, ``recipes/gpt2``)."""
    path = _user_path(ref, "recipe")
    if ref.endswith((".yaml", ".yml")) and not path.exists():
        raise ConfigError(f"no such file: {ref}",
                          hint="give a run directory's resolved.yaml (RUN_DIR/resolved.yaml), a recipe folder or its "
                               "recipe.yaml")
    if path.is_file() and path.name == RECIPE_FILE:
        return path.parent.resolve()
    if (path / RECIPE_FILE).is_file():
        return path.resolve()
    dirs = recipe_dirs()
    name = Path(ref).name
    if name in dirs and (not _looks_like_path(ref) or Path(ref).parent.name == "recipes"):
        return dirs[name].resolve()
    if path.is_file():
        raise ConfigError(f"{ref} is neither a recipe folder, a {RECIPE_FILE}, a resolved.yaml nor a script (.py)",
                          hint="pass a recipe folder, a run directory's resolved.yaml, or your own script.py")
    if path.exists():
        raise ConfigError(f"no {RECIPE_FILE} in this folder", file=str(path))
    raise NotFoundError("recipe", ref, dirs, hint="pass a folder that holds a recipe.yaml, or a recipe name")


def load_recipe_source(ref: str) -> RecipeSource:
    folder = find_recipe(ref)
    file = folder / RECIPE_FILE
    data = read_yaml(file)
    data.setdefault("name", folder.name)
    return RecipeSource(dir=folder, file=file, data=data)


def is_jobspec_file(ref: str) -> bool:
    """Whether `ref` is a resolved.yaml (a JobSpec saved in a run directory) rather than a recipe."""
    p = Path(ref)
    try:
        if not p.is_file() or p.suffix not in (".yaml", ".yml") or p.name == "recipe.yaml":
            return False
        return "hpclaunch_version" in read_yaml(p)
    except Exception:
        return False
