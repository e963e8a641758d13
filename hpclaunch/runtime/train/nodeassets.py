"""Assets read from node-local copies (profile ``assets.stage: node-local``; docs/fast-start.md).

The node script exports ``HPCLAUNCH_NODE_ASSETS=1`` and ``HPCLAUNCH_NODE_SCRATCH``; then the first rank of each node
that asks for a staged or generated asset copies its folder to ``SCRATCH/<host>/assets/<its path in the store>``
(hpclaunch/runtime/node/nodestage.py: once per node, under a lock, atomically; the other ranks of the node wait and
find it warm) and every rank of the node reads the copy. Nodes copy in parallel, each its own. With
``HPCLAUNCH_NODE_ASSETS=fallback`` (``assets.stage: auto``) a copy that fails leaves the rank reading the store,
with a warning, instead of ending it. A staged asset's key is its manifest's hash and each copied file's sha256 is
checked against the manifest as it is written; a generated asset's folder name is already its content key. A later
job finds the copy warm when every file is there with its recorded size, else it copies again. The checkpoint a job
resumes from is read from a node-local copy the same way (``local_checkpoint``): each node reads it once from the
shared filesystem instead of each rank (a sharded DeepSpeed checkpoint is copied whole to every node: each rank then
reads its shards locally).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from hpclaunch.assets.store import MANIFEST, store_root
from hpclaunch.errors import AssetError
from hpclaunch.runtime.node.nodestage import StageError, copy_tree, node_name, stage, tree_bytes

ENV_ON = "HPCLAUNCH_NODE_ASSETS"
ENV_SCRATCH = "HPCLAUNCH_NODE_SCRATCH"
FALLBACK = "fallback"  # HPCLAUNCH_NODE_ASSETS=fallback: assets.stage auto
_CHUNK = 8 << 20


def enabled() -> bool:
    return os.environ.get(ENV_ON) in ("1", FALLBACK) and bool(os.environ.get(ENV_SCRATCH))


def _or_shared(error: AssetError, folder: Path) -> Path:
    """assets.stage auto (HPCLAUNCH_NODE_ASSETS=fallback): a copy that failed leaves the rank reading `folder` in
    the store, saying so on stderr (its rank log); node-local: the error ends the rank."""
    if os.environ.get(ENV_ON) != FALLBACK:
        raise error
    print(f"hpclaunch: warning: {error} -- assets.stage auto: node {node_name()} reads {folder} from the store",
          file=sys.stderr, flush=True)
    return folder


def local_copy(folder: Path, store: Path) -> Path:
    """`folder` (an asset under `store`) as this node's verified copy; `folder` itself when staging is off."""
    if not enabled():
        return folder
    dest = Path(os.environ[ENV_SCRATCH]) / node_name() / "assets" / folder.relative_to(store)
    manifest = folder / MANIFEST
    try:
        if manifest.is_file():
            raw = manifest.read_bytes()
            key = hashlib.sha256(raw).hexdigest()[:24]
            stage(dest, key, _copy_verified(folder, json.loads(raw)),
                  need_bytes=lambda: tree_bytes(folder))
        else:
            stage(dest, folder.name, copy_tree(folder), need_bytes=lambda: tree_bytes(folder))
    except (StageError, OSError, ValueError) as e:
        return _or_shared(AssetError(f"copying {folder} to node-local scratch failed: {e}",
                                     hint="free space on the node's scratch, or set assets.stage: shared in the "
                                     "profile"), folder)
    return dest


def as_store_path(text: str) -> str:
    """`text` with this node's copies' root written as the store's (HPCLAUNCH_ASSET_STORE): keys that a recipe
    builds from an asset's path (a tokenizer's) stay the same on every node and with assets.stage shared."""
    store = os.environ.get("HPCLAUNCH_ASSET_STORE")
    if not enabled() or not store:
        return text
    return text.replace(str(Path(os.environ[ENV_SCRATCH]) / node_name() / "assets"), str(store_root(store)))


def local_checkpoint(folder: Path) -> Path:
    """The checkpoint a job resumes from, as this node's copy (a published checkpoint folder never changes: its
    path is its key); `folder` itself when staging is off."""
    if not enabled():
        return folder
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:24]
    dest = Path(os.environ[ENV_SCRATCH]) / node_name() / "checkpoints" / f"{key}-{folder.name}"
    try:
        stage(dest, key, copy_tree(folder), need_bytes=lambda: tree_bytes(folder))
    except (StageError, OSError) as e:
        return _or_shared(AssetError(f"copying checkpoint {folder} to node-local scratch failed: {e}",
                                     hint="free space on the node's scratch, or set assets.stage: shared in the "
                                     "profile"), folder)
    return dest


def _copy_verified(src: Path, manifest: dict):  # type: ignore[no-untyped-def]
    """A `fill` copying the manifest and every file it lists, each hashed as it is written and checked."""
    def fill(tmp: Path) -> None:
        shutil.copy2(src / MANIFEST, tmp / MANIFEST)
        for entry in manifest.get("files", []):
            rel = entry["path"] if isinstance(entry, dict) else str(entry)
            want = entry.get("sha256") if isinstance(entry, dict) else None
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            with open(src / rel, "rb") as r, open(out, "wb") as w:
                while chunk := r.read(_CHUNK):
                    h.update(chunk)
                    w.write(chunk)
            if want and h.hexdigest() != want:
                raise ValueError(f"{src / rel}: sha256 {h.hexdigest()} is not the manifest's {want}")
    return fill
