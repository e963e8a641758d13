"""The staged-assets check of a submission over SSH (rule 7: a job whose assets are missing is refused before it is
queued), made against the asset store on the login node: for each hub asset the job needs, its manifest and the
size and time of each of its files are read there (`cat`, `find`) and laid out here as a stand-in folder (the
manifest, and empty sparse files of those sizes and times), which hpclaunch.assets.check reads as it reads a
store. Nothing of the assets themselves passes through the connection, but for a task that needs special tokens of
its tokenizer (masked-lm) the tokenizer's own small files, which hpclaunch.assets.needs reads (the dataset's splits
it reads from the manifest)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.assets.store import MANIFEST, asset_path
from hpclaunch.config.base import replace
from hpclaunch.config.profile import asset_store
from hpclaunch.core.paths import hpclaunch_home
from hpclaunch.errors import AssetError

if TYPE_CHECKING:
    from hpclaunch.config.jobspec import JobSpec
    from hpclaunch.core.remote import SshHost


def login_store(spec: JobSpec, home: str) -> str | None:
    """The profile's asset store as a path on the login node (`~` is its home); None for one written with
    $VARIABLES, which only the job's shell expands."""
    from hpclaunch.core.remote import login_path

    return login_path(asset_store(spec.profile), home)


def _lay_out(host: SshHost, remote: Path, local: Path) -> None:
    """The stand-in of one asset folder: its manifest, and each file as an empty sparse file of its size and time."""
    manifest = host.run(["cat", "--", str(remote / MANIFEST)], check=False)
    if manifest.returncode != 0:
        return  # not staged, or no manifest: the check says which
    listed = host.run(["find", str(remote), "-type", "f", "-printf", "%s %T@ %P\\n"], check=False).stdout
    local.mkdir(parents=True, exist_ok=True)
    for line in listed.splitlines():
        size, stamp, rel = line.split(" ", 2)
        if rel == MANIFEST or rel.startswith("/") or ".." in Path(rel).parts:
            continue
        path = local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(int(size))
        ns = _nanoseconds(stamp)
        os.utime(path, ns=(ns, ns))
    (local / MANIFEST).write_text(manifest.stdout, encoding="utf-8")


def _nanoseconds(stamp: str) -> int:
    """find's %T@ (seconds.fraction, 10 digits) in nanoseconds, exactly (a float would round them)."""
    seconds, _, fraction = stamp.partition(".")
    return int(seconds) * 1_000_000_000 + int((fraction + "000000000")[:9])


def check_assets(spec: JobSpec, host: SshHost, home: str) -> None:
    """Raise AssetError, naming the login node's store, when an asset the job needs is not usable there."""
    from hpclaunch.assets.check import asset_problems
    from hpclaunch.assets.requests import requests_for_spec

    requests = requests_for_spec(spec)
    store = login_store(spec, home)
    if not requests or store is None:
        return
    local = hpclaunch_home() / "remote" / "assets"
    shutil.rmtree(local, ignore_errors=True)
    try:
        for req in requests:
            _lay_out(host, asset_path(store, req.kind, req.repo_id, req.revision),
                     asset_path(local, req.kind, req.repo_id, req.revision))
        seen_here = replace(spec, profile=replace(spec.profile, assets=replace(spec.profile.assets, store=str(local))))
        found = asset_problems(seen_here)
        if not found:
            _fit(spec, seen_here, host, store, local)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    if found:
        lines = "\n  ".join(msg.replace(str(local), store) for _, msg in found)
        raise AssetError(f"the job's assets are not ready in the store {store} on {host.target.label}:\n  {lines}",
                         hint="stage them on the cluster side (hpclaunch stage-assets there, or `hpclaunch assets "
                              "unpack FILE` of a pack made where there is network; docs/offline-assets.md)")


def _fit(spec: JobSpec, seen_here: JobSpec, host: SshHost, store: str, local: Path) -> None:
    """What the job needs of the staged assets' contents (hpclaunch.assets.needs), in the login node's store: the
    dataset's splits from its manifest, the tokenizer's special tokens from its files, fetched into the stand-in."""
    from hpclaunch.assets.needs import check_splits, check_tokenizer, checked_tokenizer
    from hpclaunch.assets.tokenizer_files import READ

    wanted = checked_tokenizer(spec)
    if wanted is not None:
        there, here = asset_path(store, "model", *wanted), asset_path(local, "model", *wanted)
        for name in READ:
            if (here / name).is_file():
                (here / name).write_text(host.run(["cat", "--", str(there / name)]).stdout, encoding="utf-8")
    try:
        check_splits(seen_here)
        check_tokenizer(seen_here)
    except AssetError as exc:
        raise AssetError(f"{exc.message.replace(str(local), store)} (on {host.target.label})",
                         hint=f"on {host.target.label}: {(exc.hint or '').replace(str(local), store)}") from None
