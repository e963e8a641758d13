"""Shell completion through click's real protocol (`_HPCLAUNCH_COMPLETE=bash_complete`), in a fresh
interpreter, the way bash runs it on TAB (docs/completion.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.state import registry

REPO = Path(__file__).resolve().parents[2]


def protocol(line: str, shell: str) -> str:
    """What `shell`'s completion script reads back for the last word of `line` (a trailing space: a new,
    empty word)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    env = {**os.environ, "_HPCLAUNCH_COMPLETE": f"{shell}_complete", "COMP_WORDS": line, "COMP_CWORD": str(cword),
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main"], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def complete(line: str) -> list[str]:
    """The values bash is offered (one "type,value" line per item)."""
    return [row.split(",", 1)[1] for row in protocol(line, "bash").splitlines() if row]


def add_job(job_id: str, when: str, recipe: str = "gpt2") -> None:
    registry.add(registry.JobRecord(job_id=job_id, scheduler="local", profile="local", recipe=recipe, preset="tiny",
                                    launcher="torchrun", layout="1n1g", name=recipe, run_dir="/nonexistent",
                                    submitted_at=when))


def test_profile_prefix_completes_the_bundled_profile(hpc_home):
    assert complete("hpclaunch submit recipes/gpt2 --profile gu") == ["guangzhou-a800"]


def test_user_profiles_are_offered_next_to_bundled_ones(hpc_home, tmp_path):
    user = tmp_path / "xdg-config" / "hpclaunch" / "cluster_profiles"
    user.mkdir(parents=True)
    (user / "gucluster.yaml").write_text("scheduler: local\n")
    assert complete("hpclaunch plan gpt2 -p gu") == ["guangzhou-a800", "gucluster"]


def test_preset_completes_the_presets_of_the_recipe_on_the_line(hpc_home):
    assert complete("hpclaunch submit recipes/gpt2 --profile local --preset t") == ["tiny"]
    offered = complete("hpclaunch submit bert_large --preset ")
    assert "tiny" in offered and "full" in offered
    assert "medium" not in offered  # a gpt2 preset: not bert_large's


def test_preset_of_an_unknown_recipe_offers_nothing(hpc_home):
    assert complete("hpclaunch submit no_such_recipe --preset ") == []


def test_recipe_argument_completes_recipe_names(hpc_home):
    offered = complete("hpclaunch submit gp")
    assert offered == ["gpt2", "gpt_mindspore"]
    assert "allreduce" in complete("hpclaunch recipes show al")  # a user (HPCLAUNCH_PATH) recipe


def test_recipe_path_is_left_to_the_shell(hpc_home):
    # type "file": the shell completes the path itself (bash: compgen -f)
    assert protocol("hpclaunch submit recipes/g", "bash").splitlines() == ["file,recipes/g"]


def test_job_ids_newest_first(hpc_home):
    add_job("local-1", "2026-01-01T00:00:00+0000")
    add_job("local-2", "2026-01-02T00:00:00+0000")
    add_job("12345", "2026-01-03T00:00:00+0000", recipe="bert_large")
    assert complete("hpclaunch logs ") == ["12345", "local-2", "local-1"]
    assert complete("hpclaunch status local") == ["local-2", "local-1"]
    assert complete("hpclaunch compare local-1 ") == ["12345", "local-2", "local-1"]


def test_zsh_items_carry_the_job_description(hpc_home):
    add_job("12345", "2026-01-03T00:00:00+0000", recipe="bert_large")
    # zsh: type, value and help on three lines per item
    assert protocol("hpclaunch cancel 1", "zsh").splitlines() == [
        "plain", "12345", "bert_large on local, 2026-01-03T00:00:00+0000"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_source_scripts_exist_for_each_shell(shell):
    env = {**os.environ, "_HPCLAUNCH_COMPLETE": f"{shell}_source", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "hpclaunch.cli.main"], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0 and "_HPCLAUNCH_COMPLETE" in proc.stdout, proc.stderr


def test_completion_imports_no_heavy_library(hpc_home):
    env = {**os.environ, "_HPCLAUNCH_COMPLETE": "bash_complete", "COMP_WORDS": "hpclaunch submit gpt2 --preset ",
           "COMP_CWORD": "4", "PYTHONPATH": str(REPO)}
    code = ("import sys\nfrom hpclaunch.cli.main import cli\ntry:\n    cli.main(prog_name='hpclaunch')\n"
            "except SystemExit:\n    pass\nprint(sorted({m.split('.')[0] for m in sys.modules}), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=60)
    loaded = proc.stderr
    for heavy in ("torch", "transformers", "deepspeed", "pydantic", "jinja2"):
        assert f"'{heavy}'" not in loaded, heavy
