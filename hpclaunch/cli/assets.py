"""hpclaunch assets list|verify|unpack --profile P"""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch.assets.inventory import list_assets, profile_store, raise_for_problems, verify_store
from hpclaunch.cli.options import WholeHelpGroup, echo_json, examples, json_option, profile_option
from hpclaunch.cli.tables import human, print_table


@click.group("assets", cls=WholeHelpGroup, epilog=examples("hpclaunch assets list --profile guangzhou-a800",
                                       "hpclaunch assets unpack assets.tar --profile guangzhou-a800"))
def assets() -> None:
    """The offline asset store: list, verify, unpack."""


@assets.command("list", epilog=examples("hpclaunch assets list --profile guangzhou-a800"))
@profile_option
@json_option
def list_cmd(profile: str, as_json: bool) -> None:
    """The staged assets of the profile's store: repo, revision, commit, files, size, source, time."""
    store = profile_store(profile)
    items = list_assets(store)
    if as_json:
        echo_json({"store": str(store), "assets": items})
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


@assets.command("verify", epilog=examples("hpclaunch assets verify --profile guangzhou-a800"))
@profile_option
@json_option
def verify_cmd(profile: str, as_json: bool) -> None:
    """Recompute every file's sha256 and name each missing or corrupt one (exit 2 if any)."""
    store = profile_store(profile)
    checks = []
    for check in verify_store(store):
        checks.append(check)
        m = check.manifest
        if m is not None and not as_json:
            click.echo(f"{'ok     ' if check.ok else 'FAILED '} {m.kind} {m.repo_id}@{m.revision} "
                       f"({len(m.files)} files)")
    if as_json:
        echo_json({"store": str(store), "assets": [c.to_json() for c in checks]})
    raise_for_problems(store, checks)
    if not checks:
        click.echo(f"the asset store {store} is empty", err=True)


@assets.command("unpack", epilog=examples("hpclaunch assets unpack assets.tar --profile guangzhou-a800",
                                         "hpclaunch assets unpack assets.tar --profile guangzhou-a800 --json"))
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@profile_option
@json_option
def unpack_cmd(archive: Path, profile: str, as_json: bool) -> None:
    """Unpack a tar written by `stage-assets --pack` into the store, verifying every file."""
    from hpclaunch.assets.pack import unpack

    store = profile_store(profile)
    done = unpack(archive, store)
    if as_json:
        echo_json({"store": str(store), "archive": str(archive),
                   "assets": [{"kind": u.manifest.kind, "repo_id": u.manifest.repo_id, "revision": u.manifest.revision,
                               "files": len(u.manifest.files), "path": str(u.path)} for u in done]})
        return
    for u in done:
        click.echo(
            f"unpacked and verified {u.manifest.kind} {u.manifest.repo_id}@{u.manifest.revision} "
            f"({len(u.manifest.files)} files) -> {u.path}"
        )


def register(group: click.Group) -> None:
    group.add_command(assets)
