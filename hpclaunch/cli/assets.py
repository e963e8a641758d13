"""hpclaunch assets list|verify|unpack --profile P"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hpclaunch.assets.store import check_files, iter_assets, refresh_mtimes, store_root
from hpclaunch.cli.options import json_option, profile_option
from hpclaunch.cli.tables import print_table
from hpclaunch.errors import AssetError


def _store(profile: str) -> Path:
    from hpclaunch.config.loader import load_profile

    return store_root(load_profile(profile).assets.store)


@click.group("assets")
def assets() -> None:
    """The offline asset store: list, verify, unpack."""


@assets.command("list")
@profile_option
@json_option
def list_cmd(profile: str, as_json: bool) -> None:
    """The staged assets of the profile's store: repo, revision, commit, files, size, source, time."""
    from hpclaunch.cli.stage import human

    store = _store(profile)
    items: list[dict[str, Any]] = []
    for folder, m in iter_assets(store):
        if m is None:
            items.append({"path": str(folder), "state": "no manifest (incomplete)"})
            continue
        items.append(
            {
                "kind": m.kind,
                "repo_id": m.repo_id,
                "revision": m.revision,
                "commit": m.commit,
                "parts": m.parts,
                "configs": m.configs,
                "files": len(m.files),
                "bytes": m.total_bytes,
                "endpoint": m.endpoint,
                "staged_at": m.staged_at,
                "path": str(folder),
                "state": "staged",
            }
        )
    if as_json:
        click.echo(json.dumps({"store": str(store), "assets": items}, indent=1))
        return
    rows = [
        (
            i.get("kind", "?"),
            i.get("repo_id", i["path"]),
            i.get("revision", ""),
            (i.get("commit") or "")[:10],
            ",".join(i.get("parts") or [c or "default" for c in i.get("configs", [])]),
            i.get("files", ""),
            human(i["bytes"]) if "bytes" in i else "",
            i.get("endpoint", ""),
            i.get("staged_at", i["state"]),
        )
        for i in items
    ]
    print_table(
        ["kind", "repo", "revision", "commit", "parts/configs", "files", "size", "source", "staged"],
        rows,
        title=f"asset store {store}",
    )


@assets.command("verify")
@profile_option
@json_option
def verify_cmd(profile: str, as_json: bool) -> None:
    """Recompute every file's sha256 and name each missing or corrupt one (exit 2 if any)."""
    store = _store(profile)
    report, bad = [], []
    for folder, m in iter_assets(store):
        if m is None:
            bad.append(f"{folder}: no manifest (incomplete asset)")
            report.append({"path": str(folder), "ok": False, "problems": ["no manifest"]})
            continue
        problems = check_files(folder, m, rehash=True)
        bad += [str(p) for p in problems]
        if not problems:
            refresh_mtimes(folder, m)  # e.g. a store copied without its mtimes: trusted again
        report.append(
            {
                "repo_id": m.repo_id,
                "kind": m.kind,
                "path": str(folder),
                "files": len(m.files),
                "ok": not problems,
                "problems": [str(p) for p in problems],
            }
        )
        if not as_json:
            click.echo(
                f"{'ok     ' if not problems else 'FAILED '} {m.kind} {m.repo_id}@{m.revision} "
                f"({len(m.files)} files)"
            )
    if as_json:
        click.echo(json.dumps({"store": str(store), "assets": report}, indent=1))
    if bad:
        raise AssetError(
            f"{len(bad)} problem(s) in the asset store {store}:\n  " + "\n  ".join(bad),
            hint="stage the assets again: hpclaunch stage-assets ... (only bad files are fetched)",
        )
    if not report:
        click.echo(f"the asset store {store} is empty", err=True)


@assets.command("unpack")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@profile_option
def unpack_cmd(archive: Path, profile: str) -> None:
    """Unpack a tar written by `stage-assets --pack` into the store, verifying every file."""
    from hpclaunch.assets.pack import unpack

    store = _store(profile)
    for u in unpack(archive, store):
        click.echo(
            f"unpacked and verified {u.manifest.kind} {u.manifest.repo_id}@{u.manifest.revision} "
            f"({len(u.manifest.files)} files) -> {u.path}"
        )


def register(group: click.Group) -> None:
    group.add_command(assets)
