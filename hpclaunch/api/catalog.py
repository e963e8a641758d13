"""What there is to run, and where: the profiles and recipes found (`profiles`, `recipes`) and one of each with
every default filled in (`profile`, `recipe`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.api.results import Listed, Shown

if TYPE_CHECKING:
    from hpclaunch.config.profile import Profile
    from hpclaunch.schedulers.base import Check


@dataclass(frozen=True)
class ProfileEntry:
    """One profile file found: the profile, or why it is invalid (`error`, its first line)."""

    name: str
    file: Path
    profile: Profile | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        from hpclaunch.config.base import dump

        p = self.profile
        if p is None:
            return {"name": self.name, "file": str(self.file), "error": self.error}
        return {"name": self.name, "file": str(self.file), "scheduler": p.scheduler, "accelerator": p.accelerator,
                "backend": p.backend, "partitions": {n: dump(s) for n, s in p.partitions.items()}}


def profiles() -> Listed[ProfileEntry]:
    """Every profile found (`hpclaunch profiles list`), by name; an unreadable file is skipped with a note."""
    from hpclaunch.config.loader import load_profile, profile_files
    from hpclaunch.config.yamlfile import UnreadableFile
    from hpclaunch.errors import HpclaunchError

    found: list[ProfileEntry] = []
    notes: list[str] = []
    for name, path in sorted(profile_files().items()):
        try:
            found.append(ProfileEntry(name, path, load_profile(str(path))))
        except UnreadableFile as exc:
            notes.append(f"hpclaunch: warning: skipped {exc.message}")
        except HpclaunchError as exc:
            found.append(ProfileEntry(name, path, None, exc.message.splitlines()[0]))
    return Listed(found, tuple(notes))


def profile(name: str) -> Shown:
    """One profile (a name or a YAML file) with every default filled in (`hpclaunch profiles show`)."""
    from hpclaunch.config.base import dump
    from hpclaunch.config.loader import find_profile, load_profile

    loaded = load_profile(name)
    return Shown(find_profile(name), dump(loaded))


@dataclass(frozen=True)
class ProfileCheck:
    """`check_profile`: every check made (name, ok, what was found, how to fix), the profile's first."""

    profile: str
    checks: list[Check]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def to_json(self) -> list[dict[str, Any]]:
        from dataclasses import asdict

        return [asdict(c) for c in self.checks]


def check_profile(name: str, *, on_node: bool = False) -> ProfileCheck:
    """Check a profile against the cluster from here (the scheduler's commands and partitions, modules, Python
    environments); `on_node`: also run one task on a node of its default partition."""
    import time

    from hpclaunch.config.loader import find_profile, load_profile
    from hpclaunch.core.paths import hpclaunch_home
    from hpclaunch.schedulers.base import Check
    from hpclaunch.submission.profilecheck import checks

    p = load_profile(name)
    folder = hpclaunch_home() / "checks" / f"{time.strftime('%Y%m%d-%H%M%S')}-{p.name}" if on_node else None
    return ProfileCheck(p.name, [Check("profile", True, f"valid ({find_profile(name)})"), *checks(p, on_node=folder)])


def init_profile(name: str, partitions: Sequence[str] = (), out: Path | None = None, *, force: bool = False,
                 scheduler: str = "slurm") -> Path:
    """Write a profile for this cluster from what its scheduler says (partitions, devices, CPUs, memory,
    limits); the file written."""
    from hpclaunch.schedulers import get_scheduler

    return get_scheduler(scheduler).write_profile(name, partitions, out, force=force)


@dataclass(frozen=True)
class RecipeEntry:
    """One recipe folder found: its launcher, task, presets and description, or why it is invalid."""

    name: str
    folder: Path
    launcher: str | None = None
    task: str | None = None
    presets: tuple[str, ...] = ()
    description: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            return {"name": self.name, "folder": str(self.folder), "error": self.error}
        return {"name": self.name, "folder": str(self.folder), "launcher": self.launcher, "task": self.task,
                "presets": list(self.presets), "description": self.description}


def recipes() -> Listed[RecipeEntry]:
    """Every recipe found (`hpclaunch recipes list`), by name; an unreadable recipe.yaml is skipped with a note."""
    from hpclaunch.config.loader import recipe_dirs
    from hpclaunch.config.yamlfile import UnreadableFile, read_yaml
    from hpclaunch.errors import HpclaunchError

    found: list[RecipeEntry] = []
    notes: list[str] = []
    for name, folder in sorted(recipe_dirs().items()):
        try:
            data = read_yaml(folder / "recipe.yaml")
        except UnreadableFile as exc:
            notes.append(f"hpclaunch: warning: skipped {exc.message}")
            continue
        except HpclaunchError as exc:
            found.append(RecipeEntry(name, folder, error=exc.message))
            continue
        presets = data.get("presets")
        found.append(RecipeEntry(name, folder, data.get("launcher"), data.get("task"),
                                 tuple(str(k) for k in presets) if isinstance(presets, dict) else (),
                                 str(data.get("description", ""))))
    return Listed(found, tuple(notes))


def names(kind: str) -> dict[str, Path]:
    """The profile files ("profiles") or recipe folders ("recipes") found, by name, without reading them (shell
    completion)."""
    from hpclaunch.config.loader import profile_files, recipe_dirs

    return dict(profile_files() if kind == "profiles" else recipe_dirs())


def presets(recipe: str) -> tuple[list[str], str | None]:
    """The presets of a recipe (a name or a folder) and its default one, read without validating it."""
    from hpclaunch.config.loader import load_recipe_source

    data = load_recipe_source(recipe).data
    found = data.get("presets")
    return ([str(n) for n in found] if isinstance(found, dict) else []), data.get("default_preset")


def recipe(name: str, preset: str | None = None) -> Shown:
    """One recipe with its defaults filled in and `preset` applied (`hpclaunch recipes show`)."""
    from hpclaunch.config.base import dump
    from hpclaunch.config.loader import find_recipe, load_recipe_source
    from hpclaunch.submission.resolve import merge_recipe

    merged, chosen = merge_recipe(load_recipe_source(name), preset, ())
    return Shown(find_recipe(name), dump(merged), chosen)
