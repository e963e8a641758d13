"""Exceptions. Every user-facing failure is an HpclaunchError: the CLI prints its message and exits 2."""

from __future__ import annotations

from collections.abc import Iterable


class HpclaunchError(Exception):
    """A failure the user can fix. `hint` says what to do."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(HpclaunchError):
    """A profile, recipe or override is invalid. Names the file and the dotted key."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None,
                 hint: str | None = None):
        where = ""
        if file:
            where = f"{file}"
        if key:
            where = f"{where}: {key}" if where else key
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.file = file
        self.key = key


class NotFoundError(HpclaunchError):
    """A named thing (profile, recipe, job, template) does not exist."""

    def __init__(self, kind: str, name: str, available: Iterable[str] = (), hint: str | None = None):
        avail = sorted(available)
        msg = f"unknown {kind} {name!r}"
        if avail:
            msg += f"; available: {', '.join(avail)}"
        super().__init__(msg, hint=hint)


class LimitError(HpclaunchError):
    """A request exceeds a profile limit (nodes, GPUs per node, time)."""


class CommandError(HpclaunchError):
    """An external command (sbatch, squeue, ...) is missing or failed."""


class AssetError(HpclaunchError):
    """An asset is missing, incomplete or corrupt in the offline store, or could not be staged."""


class JobFailed(HpclaunchError):
    """A followed job ended in a state other than COMPLETED."""

    exit_code = 1


class NoPlan(HpclaunchError):
    """The memory plan cannot be made here: the model's config is not staged, torch is missing, or the
    model is of a kind the planner does not know."""


class DoesNotFit(LimitError):
    """The memory plan says the job needs more memory per device than the partition's devices have."""
