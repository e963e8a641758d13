"""stage-assets for a profile that submits over SSH (docs/remote.md): the assets are staged here, where the network
is, into an outbox store ($HPCLAUNCH_HOME/remote/stores/<host>), then each asset folder goes to the same place in
the login node's store as one tar stream over the connection, replacing an older copy at once (renamed into place).
An asset whose manifest there is already this one is not sent again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.assets.store import MANIFEST
from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.core.remote import SshHost, login_path, ssh_host
from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.assets.workflow import StagePlan


def outbox(host: str) -> Path:
    return hpclaunch_home() / "remote" / "stores" / host


def login_root(plan: StagePlan, host: SshHost) -> Path:
    """The profile's store on the login node (`~` is its home there)."""
    store = plan.login_store or "~/.hpclaunch/assets"
    there = login_path(store, host.home())
    if there is None:
        raise ConfigError(f"{store!r}: the asset store of a profile with remote: is a path on the login node: "
                          "absolute or starting with ~/", key="assets.store")
    return Path(there)


def send(plan: StagePlan, folders: Sequence[Path]) -> str:
    """Copy each staged asset folder (under plan.store) to the login node's store; the login node's name."""
    assert plan.remote is not None
    host = ssh_host(plan.remote)
    root = login_root(plan, host)
    for folder in folders:
        there = root / folder.relative_to(plan.store)
        here_manifest = (folder / MANIFEST).read_text(encoding="utf-8")
        if host.run(["cat", "--", str(there / MANIFEST)], check=False).stdout == here_manifest:
            continue  # the same asset is there already
        host.put_dir(folder, there, replace=True)
    return host.target.label
