"""`hpclaunch mcp` driven by the official SDK's client over a real stdio pipe (tests/mcpclient.py), without a
cluster: the tools listed with their schemas, answers equal to the CLI's `--json`, Mixtral planned, dry runs that
queue nothing, and bad input answered with the CLI's error, nothing submitted or left behind. Real submits and the
dev cluster: tests/integration/test_mcp.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mcpclient import doc_configs, documented_server, mcp_client

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"profiles_list", "profiles_show", "recipes_list", "recipes_show", "avail", "plan", "submit", "jobs",
         "status", "wait", "logs", "diagnose", "report", "compare", "cancel"}
MIXTRAL = REPO / "tests" / "fixtures" / "configs" / "mixtral-8x7b" / "config.json"


def cli_json(hpclaunch, *args: str):
    res = hpclaunch(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def cli_error(hpclaunch, *args: str) -> str:
    res = hpclaunch(*args)
    assert res.exit_code == 2, res.output
    return res.stderr.strip()


def test_every_documented_client_configuration_starts_hpclaunch_mcp():
    configs = doc_configs()
    assert len(configs) == 4  # Claude Code, Claude Desktop, VS Code, Cursor
    for config in configs:
        servers = config.get("mcpServers") or config["servers"]
        entry = servers["hpclaunch"]
        assert Path(entry["command"]).name == "hpclaunch" and entry["args"] == ["mcp"], entry
    assert documented_server() == ("hpclaunch", ["mcp"])


def test_the_tools_are_listed_with_descriptions_and_schemas(hpc_home):
    with mcp_client() as client:
        tools = {t.name: t for t in client.tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object", tool.name
    submit = tools["submit"].input_schema
    assert submit["required"] == ["recipe"] and submit["properties"]["confirm"]["default"] is False
    assert tools["cancel"].input_schema["required"] == ["jobs"]
    wait = tools["wait"].input_schema
    assert wait["required"] == ["job"] and set(wait["properties"]) == {"job", "until", "timeout"}, wait
    assert tools["status"].annotations.read_only_hint and tools["cancel"].annotations.destructive_hint


def test_answers_are_the_cli_json(hpclaunch):
    with mcp_client() as client:
        assert client.ok("profiles_list") == cli_json(hpclaunch, "profiles", "list")
        assert client.ok("profiles_show", profile="dev-slurm") == cli_json(hpclaunch, "profiles", "show", "dev-slurm")
        assert client.ok("recipes_list") == cli_json(hpclaunch, "recipes", "list")
        shown = client.ok("recipes_show", recipe="gpt2", preset="tiny")
        assert shown == cli_json(hpclaunch, "recipes", "show", "gpt2", "--preset", "tiny")
        assert shown["name"] == "gpt2"
        assert client.ok("jobs") == [] == cli_json(hpclaunch, "jobs")


def test_plan_mixtral(hpclaunch, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # the profile's asset store is under ~
    imported = hpclaunch("assets", "import", str(MIXTRAL), "--model", "mistralai/Mixtral-8x7B-v0.1", "--profile",
                         "guangzhou-a800")
    assert imported.exit_code == 0, imported.output
    args = {"recipe": str(REPO / "recipes" / "mixtral"), "profile": "guangzhou-a800", "layout": "4n8g",
            "sets": ["train.micro_batch_size=1"]}
    with mcp_client() as client:
        planned = client.ok("plan", **args)
        too_big = client.ok("plan", **{**args, "layout": "1n1g"})
    assert planned == cli_json(hpclaunch, "plan", args["recipe"], "--profile", "guangzhou-a800", "--layout", "4n8g",
                               "--set", "train.micro_batch_size=1")
    assert planned["recipe"] == "mixtral" and planned["params"] > 40e9  # Mixtral 8x7B: about 46.7 B parameters
    assert planned["fits"] is True and planned["layout"] == "4n8g"
    assert too_big["fits"] is False and too_big["suggestions"]


def test_submit_is_a_dry_run_unless_confirmed(hpc_home):
    with mcp_client() as client:
        res = client.call("submit", recipe="allreduce", profile="local", sets=["time=00:05:00"])
        assert not res.is_error, res.content
        data = json.loads(res.content[0].text)
        assert data["job_id"] is None and data["profile"] == "local" and data["recipe"] == "allreduce"
        assert "dry run: nothing submitted" in res.content[1].text
        assert Path(data["script"]).read_text().startswith("#!")
        assert client.ok("jobs") == []  # nothing queued, nothing recorded
        slurm = client.ok("submit", recipe="allreduce", profile="dev-slurm", layout="2n1g")
        assert slurm["job_id"] is None and slurm["layout"] == "2n1g"
        assert "#SBATCH --nodes=2" in Path(slurm["script"]).read_text()
    assert not (hpc_home / "registry").exists() or not any((hpc_home / "registry").iterdir())


@pytest.mark.parametrize("tool, args, cli_args", [
    ("submit", {"recipe": "allreduce", "profile": "nope", "confirm": True},
     ["submit", "allreduce", "--profile", "nope"]),
    ("submit", {"recipe": "allreduce", "profile": "local", "sets": ["train.no_such_key=1"], "confirm": True},
     ["submit", "allreduce", "--profile", "local", "--set", "train.no_such_key=1"]),
    ("submit", {"recipe": "allreduce", "profile": "dev-slurm", "nodes": 99, "confirm": True},
     ["submit", "allreduce", "--profile", "dev-slurm", "--nodes", "99"]),
    ("plan", {"recipe": "no_such_recipe", "profile": "local"}, ["plan", "no_such_recipe", "--profile", "local"]),
    ("status", {"job": "424242"}, ["status", "424242"]),
    ("logs", {"job": "--all"}, ["logs", "--", "--all"]),
    ("logs", {"job": "424242", "grep": "("}, ["logs", "424242", "--grep", "("]),
    ("cancel", {"jobs": ["424242"]}, ["cancel", "424242"]),
    ("profiles_show", {"profile": "nope"}, ["profiles", "show", "nope"]),
])
def test_bad_input_is_the_cli_error_and_leaves_nothing(hpclaunch, hpc_home, tool, args, cli_args):
    with mcp_client() as client:
        message = client.error(tool, **args)
    assert message == cli_error(hpclaunch, *cli_args)
    assert message.startswith("hpclaunch: error: ")
    for folder in ("runs", "registry"):
        assert not (hpc_home / folder).exists() or not any((hpc_home / folder).iterdir()), folder


def test_arguments_of_the_wrong_type_are_an_error_result(hpc_home):
    with mcp_client() as client:
        assert "gpus_per_node" in client.error("plan", recipe="gpt2", profile="local", gpus_per_node="two")
        assert "jobs" in client.error("cancel", jobs=[])
        assert "no_such_tool" in client.error("no_such_tool")
