"""Every command (and subcommand) has --help and is named in the docs (docs/*.md or README.md)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from hpclaunch.cli.main import cli

REPO = Path(__file__).resolve().parents[2]


def _commands() -> list[tuple[str, ...]]:
    cli.load_all()
    out: list[tuple[str, ...]] = []

    def walk(group: click.Group, path: tuple[str, ...]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert cmd is not None
            out.append((*path, name))
            if isinstance(cmd, click.Group):
                walk(cmd, (*path, name))

    walk(cli, ())
    return out


COMMANDS = _commands()


def test_the_core_commands_exist():
    names = {" ".join(c) for c in COMMANDS}
    assert {
        "submit",
        "profiles list",
        "profiles show",
        "profiles check",
        "recipes list",
        "recipes show",
        "status",
        "cancel",
    } <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_command_has_help(hpclaunch, path):
    result = hpclaunch(*path, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: hpclaunch {' '.join(path)}")
    help_text = result.stdout.split("\n\n", 2)[1].strip()
    assert help_text, "no description"


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_command_help_has_examples(hpclaunch, path):
    out = hpclaunch(*path, "--help").stdout
    assert "\nExamples:\n" in out.replace("  Examples:", "Examples:"), out
    shown = out.split("Examples:\n", 1)[1].splitlines()
    name = "hpclaunch " + " ".join(path)
    assert any(line.strip().startswith(name) or f"$({name}" in line for line in shown), out


def test_top_level_help_lines_are_whole_sentences(hpclaunch):
    for args in ((), ("profiles",), ("recipes",), ("assets",)):
        out = hpclaunch(*args, "--help").stdout
        commands = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
        assert "..." not in commands, out
        assert commands.rstrip().endswith("."), out


def test_n_means_the_last_n_everywhere(hpclaunch):
    """`-n N` is one thing on every command: the last (newest) N."""
    for path in COMMANDS:
        cmd_help = hpclaunch(*path, "--help").stdout
        for line in cmd_help.splitlines():
            if line.strip().startswith("-n,"):
                assert "N" in line and ("the last N" in line or "the N newest" in line), line


def _docs_text() -> str:
    files = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    return "\n".join(f.read_text(encoding="utf-8") for f in files if f.is_file())


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_command_appears_in_the_docs(path):
    name = "hpclaunch " + " ".join(path)
    assert name in _docs_text(), f"`{name}` is not mentioned in docs/*.md or README.md"


def test_version(hpclaunch):
    from hpclaunch.core.version import __version__

    result = hpclaunch("--version")
    assert result.exit_code == 0 and __version__ in result.stdout
