"""Run hpclaunch.runtime.train.prepare for a job spec in a child Python, offline, against a store."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hpclaunch.config.jobspec import JobSpec
from hpclaunch.core import cmd
from hpclaunch.errors import AssetError, CommandError

_OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def prepare_data(spec: JobSpec, store: Path) -> dict[str, Any]:
    """Tokenize and group `spec`'s dataset into `store` (a no-op when the cache is there already)."""
    with tempfile.TemporaryDirectory(prefix="hpclaunch-prepare-") as tmp:
        resolved = Path(tmp) / "resolved.yaml"
        resolved.write_text(spec.to_yaml(), encoding="utf-8")
        env = {**os.environ, **_OFFLINE, "HPCLAUNCH_ASSET_STORE": str(store)}
        try:
            proc = cmd.run([sys.executable, "-m", "hpclaunch.runtime.train.prepare", str(resolved)], env=env,
                           timeout=6 * 3600)
        except CommandError as exc:
            raise AssetError(f"preparing the data of recipe {spec.recipe.name!r} failed: "
                             f"{exc.message.splitlines()[-1]}") from None
    return json.loads(proc.stdout.strip().splitlines()[-1])
