"""hpclaunch schema profile|recipe"""

from __future__ import annotations

from pathlib import Path

import click

from hpclaunch.cli.options import examples


@click.command("schema", epilog=examples(
    "hpclaunch schema profile -o ~/.config/hpclaunch/profile.schema.json",
    "hpclaunch schema recipe > recipe.schema.json"))
@click.argument("kind", type=click.Choice(["profile", "recipe"]))
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the schema to this file (default: standard output)")
def schema_cmd(kind: str, out: Path | None) -> None:
    """The JSON Schema of a profile or recipe file, for editors (docs/profiles.md#editor-support)."""
    from hpclaunch import api

    text = api.schema(kind)
    if out is None:
        click.echo(text, nl=False)
        return
    target = out.expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # ~/.config/hpclaunch/ may not exist yet
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        from hpclaunch.errors import ConfigError

        raise ConfigError(f"cannot write {target}: {exc.strerror}", key="--out",
                          hint="give a file in a folder you can write") from None
    click.echo(f"wrote the {kind} schema to {out}", err=True)


def register(group: click.Group) -> None:
    group.add_command(schema_cmd)
