"""`--json` is declared once (hpclaunch.cli.options) and every command that has it uses that option and
writes through echo_json: one compact JSON object per line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from hpclaunch.cli.main import cli
from hpclaunch.cli.options import JSON_HELP, JsonOption

CLI_DIR = Path(__file__).resolve().parents[2] / "hpclaunch" / "cli"
WITH_JSON = {"submit", "status", "jobs", "cancel", "logs", "report", "compare", "stage-assets", "assets list",
             "assets verify", "assets unpack", "export", "plan", "profiles list", "profiles show", "recipes list",
             "recipes show"}


def _commands() -> dict[str, click.Command]:
    cli.load_all()
    found: dict[str, click.Command] = {}

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert cmd is not None
            found[f"{prefix}{name}"] = cmd
            if isinstance(cmd, click.Group):
                walk(cmd, f"{prefix}{name} ")

    walk(cli, "")
    return found


COMMANDS = _commands()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_json_is_the_shared_option(name: str) -> None:
    params = [p for p in COMMANDS[name].params if "--json" in getattr(p, "opts", ())]
    if name in WITH_JSON:
        assert len(params) == 1, f"`{name}` has no --json"
    for p in params:
        assert isinstance(p, JsonOption), f"`{name}` declares its own --json; use hpclaunch.cli.options.json_option"
        assert p.name == "as_json" and p.is_flag and p.help == JSON_HELP


def test_only_the_shared_helper_writes_json() -> None:
    for module in CLI_DIR.glob("*.py"):
        if module.name == "options.py":
            continue
        text = module.read_text(encoding="utf-8")
        assert not re.search(r"json\.dumps|\"--json\"", text), f"{module.name}: use echo_json / json_option"


def test_new_json_outputs(hpclaunch) -> None:
    profiles = json.loads(hpclaunch("profiles", "list", "--json").stdout)
    local = next(p for p in profiles if p["name"] == "local")
    assert local["scheduler"] == "local" and local["partitions"]
    assert json.loads(hpclaunch("profiles", "show", "local", "--json").stdout)["name"] == "local"
    recipes = json.loads(hpclaunch("recipes", "list", "--json").stdout)
    assert "tiny" in next(r for r in recipes if r["name"] == "gpt2")["presets"]
    shown = json.loads(hpclaunch("recipes", "show", "gpt2", "--preset", "tiny", "--json").stdout)
    assert shown["launcher"] == "torchrun"


def test_every_json_output_carries_the_schema_version(hpclaunch) -> None:
    assert {p["schema"] for p in json.loads(hpclaunch("profiles", "list", "--json").stdout)} == {1}
    assert json.loads(hpclaunch("recipes", "show", "gpt2", "--json").stdout)["schema"] == 1
    submitted = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run", "--json")
    assert json.loads(submitted.stdout)["schema"] == 1


def test_assets_unpack_json(hpclaunch, write_profile, tmp_path: Path) -> None:
    from hpclaunch.assets.pack import pack
    from tests.unit.test_assets_workflow import _staged_model

    folder = _staged_model(tmp_path / "there")
    pack(tmp_path / "there", [folder], tmp_path / "assets.tar")
    profile = str(write_profile(assets={"store": str(tmp_path / "here")}))
    result = hpclaunch("assets", "unpack", str(tmp_path / "assets.tar"), "--profile", profile, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == 1 and data["store"] == str(tmp_path / "here")
    (asset,) = data["assets"]
    assert asset["repo_id"] == "org/tiny" and asset["files"] == 1 and Path(asset["path"], "config.json").is_file()
