"""stage-assets for a profile that submits over SSH (docs/remote.md): the assets are staged here, where the network
is, into an outbox store ($HPCLAUNCH_HOME/remote/stores/<host>), then each asset folder goes to the same place in
the login node's store as one tar stream over the connection, replacing an older copy at once (renamed into place).
An asset whose manifest there is already this one is not sent again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpclaunch.assets.store import MANIFEST
from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.remote import SshHost, login_path, ssh_host
from hpclaunch.errors import ConfigError


def outbox(host: str) -> Path:
    return hpclaunch_home() / "remote" / "stores" / host


def login_root(login_store: str | None, host: SshHost) -> Path:
    """The profile's store on the login node (`~` is its home there)."""
    store = login_store or "~/.hpclaunch/assets"
    there = login_path(store, host.home())
    if there is None:
        raise ConfigError(f"{store!r}: the asset store of a profile with remote: is a path on the login node: "
                          "absolute or starting with ~/", key="assets.store")
    return Path(there)


def send(remote: dict[str, Any], outbox_store: Path, login_store: str | None, folders: Sequence[Path]) -> str:
    """Copy each staged asset folder (under `outbox_store`) to the same place in the login node's store (the
    profile's `login_store`) on the `remote` host; the login node's name."""
    host = ssh_host(remote)
    root = login_root(login_store, host)
    for folder in folders:
        there = root / folder.relative_to(outbox_store)
        here_manifest = (folder / MANIFEST).read_text(encoding="utf-8")
        if host.run(["cat", "--", str(there / MANIFEST)], check=False).stdout == here_manifest:
            continue  # the same asset is there already
        host.put_dir(folder, there, replace=True)
    return host.target.label
