"""Candidates for shell completion (docs/completion.md): profile, recipe and preset names and recent job ids.

Each function returns (value, help) pairs starting with what the user typed so far. They never raise: a
broken profile, recipe or job record offers nothing rather than a traceback in the user's shell. Light on
purpose (no pydantic, no jinja2, no training library): the shell runs this on every TAB.
"""

from __future__ import annotations

from hpclaunch.errors import HpclaunchError

#: `hpclaunch status <TAB>` and friends: this many of the newest job ids.
RECENT_JOBS = 50

Candidate = tuple[str, str]


def looks_like_path(text: str) -> bool:
    """Whether the user is typing a path (the shell then completes files/folders itself)."""
    return "/" in text or text.startswith((".", "~"))


def profiles(incomplete: str) -> list[Candidate]:
    """Profile names (user folders and bundled ones) starting with `incomplete`."""
    from hpclaunch.api.catalog import names

    return [(name, str(path)) for name, path in sorted(names("profiles").items()) if name.startswith(incomplete)]


def recipes(incomplete: str) -> list[Candidate]:
    """Recipe names (user folders and bundled ones) starting with `incomplete`."""
    from hpclaunch.api.catalog import names

    return [(name, str(path)) for name, path in sorted(names("recipes").items()) if name.startswith(incomplete)]


def presets(recipe: str | None, incomplete: str) -> list[Candidate]:
    """The presets of `recipe` (a name or folder) starting with `incomplete`; none when it cannot be read."""
    if not recipe:
        return []
    from hpclaunch.api.catalog import presets as recipe_presets

    try:
        found, default = recipe_presets(recipe)
    except (HpclaunchError, OSError):
        return []
    return [(name, "default" if name == default else "") for name in found if name.startswith(incomplete)]


def jobs(incomplete: str) -> list[Candidate]:
    """The ids of the RECENT_JOBS newest recorded jobs starting with `incomplete`, newest first, each with
    its recipe, profile and submission time."""
    from hpclaunch.api.tracking import recorded

    try:
        records = recorded()
    except HpclaunchError:
        return []
    newest = [r for r in reversed(records) if not r.pending][:RECENT_JOBS]
    return [(r.job_id, f"{r.recipe} on {r.profile}, {r.submitted_at}") for r in newest
            if r.job_id.startswith(incomplete)]
