"""Files that survive a crash once written: fsync a file, or a folder after a rename into it (checkpoints: the
torch engines' in checkpoint.py and recipes/gpt_mindspore's). Standard library only."""

from __future__ import annotations

import os
from pathlib import Path


def fsync(path: Path) -> None:
    """Flush `path` (a file, or a folder: its entries) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
