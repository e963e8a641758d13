"""hpclaunch assets list|verify|unpack|import --profile P"""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch.api import assets as store_api
from hpclaunch.cli.options import WholeHelpGroup, echo_json, examples, json_option, profile_option
from hpclaunch.cli.tables import human, print_table


@click.group("assets", cls=WholeHelpGroup, epilog=examples("hpclaunch assets list --profile guangzhou-a800",
                                       "hpclaunch assets unpack assets.tar --profile guangzhou-a800",
                                       "hpclaunch assets import ./gpt2 --model gpt2 --profile guangzhou-a800"))
def assets() -> None:
    """The offline asset store: list, verify, unpack, import."""


@assets.command("list", epilog=examples("hpclaunch assets list --profile guangzhou-a800"))
@profile_option
@json_option
def list_cmd(profile: str, as_json: bool) -> None:
    """The staged assets of the profile's store: repo, revision, commit, files, size, source, time."""
    store, items = store_api.listed(profile)
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
        ids=("repo",),
        shrink=("parts/configs", "source", "staged"),
    )


@assets.command("verify", epilog=examples("hpclaunch assets verify --profile guangzhou-a800"))
@profile_option
@json_option
def verify_cmd(profile: str, as_json: bool) -> None:
    """Recompute every file's sha256 and name each missing or corrupt one (exit 2 if any)."""
    store = store_api.store_of(profile)
    checks = []
    for check in store_api.verify(profile):
        checks.append(check)
        m = check.manifest
        if m is not None and not as_json:
            click.echo(f"{'ok     ' if check.ok else 'FAILED '} {m.kind} {m.repo_id}@{m.revision} "
                       f"({len(m.files)} files)")
    if as_json:
        echo_json({"store": str(store), "assets": [c.to_json() for c in checks]})
    store_api.verified(profile, checks)
    if not checks:
        click.echo(f"the asset store {store} is empty", err=True)


@assets.command("unpack", epilog=examples("hpclaunch assets unpack assets.tar --profile guangzhou-a800",
                                         "hpclaunch assets unpack assets.tar --profile guangzhou-a800 --json"))
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@profile_option
@json_option
def unpack_cmd(archive: Path, profile: str, as_json: bool) -> None:
    """Unpack a tar written by `stage-assets --pack` into the store, verifying every file."""
    store = store_api.store_of(profile)
    done = store_api.unpack(archive, profile)
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


@assets.command("import", epilog=examples(
    "hpclaunch assets import ~/Downloads/gpt2 --model gpt2 --profile guangzhou-a800",
    "hpclaunch assets import ./tokenizer --model google-bert/bert-large-uncased --profile guangzhou-a800",
    "hpclaunch assets import ./data --dataset Salesforce/wikitext:wikitext-2-raw-v1 --profile guangzhou-a800",
    "hpclaunch assets import ./wikitext --dataset Salesforce/wikitext --revision main --profile dev-slurm"))
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--model", "model", default=None, metavar="ID[@REV]",
              help="import PATH as (parts of) this hub model: config, weights, tokenizer files (e.g. gpt2)")
@click.option("--dataset", "dataset", default=None, metavar="ID[:CONFIG][@REV]",
              help="import PATH's parquet files as this hub dataset (under CONFIG/ when given)")
@click.option("--revision", default="main", show_default=True, help="the revision the files are of")
@profile_option
@json_option
def import_cmd(path: Path, model: str | None, dataset: str | None, revision: str, profile: str,
               as_json: bool) -> None:
    """Copy files downloaded by hand into the store with a manifest (sha256), as if staged. The parts (or dataset
    configs) of the asset already in the store that PATH does not bring are kept."""
    from hpclaunch.errors import ConfigError

    if (model is None) == (dataset is None):
        raise ConfigError("pass exactly one of --model ID and --dataset ID",
                          hint="hpclaunch assets import PATH --model gpt2 --profile P")
    kind, ref = ("model", model) if model is not None else ("dataset", dataset)
    assert ref is not None
    body, _, rev = ref.partition("@")
    if rev and revision not in ("main", rev):
        raise ConfigError(f"two revisions: {rev!r} in --{kind} {ref} and --revision {revision}",
                          hint="give the revision once")
    repo_id, _, config = body.partition(":") if kind == "dataset" else (body, "", "")
    done = store_api.import_files(path, profile, kind, repo_id, rev or revision, config or None)
    m = done.manifest
    if as_json:
        echo_json({"kind": m.kind, "repo_id": m.repo_id, "revision": m.revision, "parts": m.parts,
                   "configs": m.configs, "files": len(m.files), "copied": done.copied, "bytes": m.total_bytes,
                   "kept": list(done.kept), "tokenizer": m.tokenizer, "notes": list(done.notes),
                   "path": str(done.path)})
        return
    held = ", ".join(m.parts) if kind == "model" else ", ".join(c or "(default config)" for c in m.configs)
    files = f"{done.copied} file{'s' * (done.copied != 1)}"
    click.echo(f"imported {kind} {m.repo_id}@{m.revision}: {files} copied -> {done.path}")
    kept = f"; kept from the store: {', '.join(k or '(default config)' for k in done.kept)}" if done.kept else ""
    click.echo(f"  it holds {held} ({len(m.files)} files, {human(m.total_bytes)}){kept}")
    for note in done.notes:
        click.echo(f"  {note}")
    specials = m.tokenizer.get("special_tokens") or {}
    if specials:
        tokens = ", ".join(f"{role.removesuffix('_token')} {tok}" for role, tok in specials.items())
        click.echo(f"  tokenizer ({m.tokenizer['kind']}): {tokens}")


def register(group: click.Group) -> None:
    group.add_command(assets)
