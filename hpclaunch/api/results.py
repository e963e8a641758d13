"""Result types the api functions share: a list with what was said while making it (`Listed`), and a shown
document with the file it came from (`Shown`). Each command's own result lives beside its function."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Listed(Generic[T]):
    """`items`, and `notes`: what was said while finding them (warnings: the CLI prints them on stderr, an MCP
    tool answers them in a second text block). Its JSON is the list."""

    items: list[T]
    notes: tuple[str, ...] = ()

    def to_json(self) -> list[T]:
        return self.items


@dataclass(frozen=True)
class Shown:
    """A resolved profile or recipe (every default filled in), the file it came from and the preset applied. Its
    JSON is the document."""

    file: Path
    data: dict[str, Any]
    preset: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.data
