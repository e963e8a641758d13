"""Every `hpclaunch ...` command that README.md and docs/*.md show (in fenced or indented code blocks) runs, so a
doc that drifts from the code fails here.

How each runs: a submit that would queue runs as `--dry-run` (the whole script is rendered and checked, nothing is
queued; `--follow` dropped); commands about a job (status, logs, report, compare, export, cancel, resume, ...) run
against a real job the test runs on the `local` profile (gpt2's tiny preset, two CPU ranks), its id standing for
the docs' 12345, 42, JOB, ...; RUN_DIR, the export-run archive and the placeholders of usage lines (P, RECIPE,
JOB_A) are substituted; optional parts in brackets are left out; `watch` without jobs runs `--once`. What cannot
run here is in CANNOT_RUN with the reason. A command that starts with environment assignments
(`HPCLAUNCH_PATH=tests/fixtures hpclaunch submit ...`) runs with them set, from the checkout's root, where a user of
the docs stands when a value is a path relative to it.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# (regex over the command as written) -> why it cannot run in a unit test on this machine
CANNOT_RUN = {
    r"^hpclaunch stage-assets ": "downloads from the hub (network); tests/integration/test_stage_hub.py runs it "
                                 "against a loopback hub",
    r"^hpclaunch assets (import|unpack) ": "needs the user's downloaded folder / a pack made by stage-assets; "
                                           "tests/integration/test_assets_seed002.py runs docs/offline-assets.md's "
                                           "seed-002 imports on files laid out as the seed's",
    r"^hpclaunch profiles (init|check) ": "asks a Slurm cluster (scontrol, sinfo, module); the integration tests "
                                          "run them on the dev cluster",
    r"^hpclaunch sync ": "hands offline W&B runs to W&B's uploader (network, credentials)",
    r"^hpclaunch watch +\d\d:\d\d:\d\d": "sample output of watch, not a command",
    r"^hpclaunch submit RECIPE ": "the usage line of submit --sweep (KEY=V1,V2,...); the next line is its example",
    r"^hpclaunch ui(?! --check)": "serves until Ctrl-C (or is what it prints); `hpclaunch ui --check`, shown too, "
                                  "starts it, asks it for the jobs page and stops; tests/integration/"
                                  "test_ui_browser.py and test_ui_tunnel.py serve it to a browser and over SSH",
}
# the docs' job ids, job placeholders and profiles of clusters that are not this machine
JOB_WORDS = {"12345", "12346", "42", "43", "4242", "1717", "JOB", "JOB_A", "JOB_B"}
SWEEP_WORDS = {"12350", "SWEEP"}
PROFILE_WORDS = {"P": "local", "a": "local", "b": "local"}
# what a documented command may exit with, where 0 is not what it documents
EXPECTED_CODE = {r"^hpclaunch resume ": 2,  # the test's job COMPLETED: nothing to resume (said with exit 2)
                 r"^hpclaunch suspects --clear node3": 2,  # no node is a suspect here: "unknown suspect node"
                 r"^hpclaunch submit recipes/gpt_mindspore .*--set train\.compile=": 2}  # a key it never reads


def code_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every fenced (```) and indented (4 spaces after a blank line) code block."""
    fence, indented, blank, continued = False, False, True, False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            yield n, line
        elif line.startswith("    ") and (blank or indented) and (
                continued or not line.lstrip().startswith(("-", "*", "|"))):  # `    --set ...` after a `\` line
            indented = True
            continued = line.rstrip().endswith("\\")
            yield n, line[4:]
        elif line.strip():
            indented = False
        blank = not line.strip()


def joined_lines(text: str) -> Iterator[tuple[int, str]]:
    """code_lines, with a line ending in a backslash joined to the next (as the shell reads it)."""
    held: tuple[int, str] | None = None
    for n, line in code_lines(text):
        if held is not None:
            n, line = held[0], held[1] + " " + line.strip()
        if line.rstrip().endswith("\\"):
            held = (n, line.rstrip()[:-1].rstrip())
            continue
        held = None
        yield n, line


ASSIGNMENTS = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S* +)+")  # `NAME=value NAME2=value hpclaunch ...`


def doc_commands() -> list[tuple[str, str]]:
    """(file:line, command) for each `hpclaunch ...` command shown, with the environment assignments before it;
    `a ; b` on one line are two."""
    out = []
    for doc in DOCS:
        for n, line in joined_lines(doc.read_text(encoding="utf-8")):
            text = re.sub(r"^\$ ", "", line.strip())
            if not ASSIGNMENTS.sub("", text).startswith("hpclaunch "):
                continue
            for part in re.split(r" ; ", text):
                out.append((f"{doc.relative_to(REPO)}:{n}", part.strip()))
    return out


COMMANDS = doc_commands()


def assignments_of(command: str) -> dict[str, str]:
    """The environment a command sets for itself (`NAME=value hpclaunch ...`)."""
    found = ASSIGNMENTS.match(command)
    return dict(w.split("=", 1) for w in shlex.split(found[0])) if found else {}


def argv_of(command: str) -> list[str]:
    """The words after `hpclaunch`, without the comment and the optional [..] parts of usage lines."""
    words, out, depth = shlex.split(ASSIGNMENTS.sub("", command), comments=True)[1:], [], 0
    for w in words:
        if w.startswith("["):
            depth += 1
        if depth == 0:
            out.append(w)
        if w.endswith("]") and depth:
            depth -= 1
    return out


def test_the_docs_show_commands():
    assert len(COMMANDS) > 80, COMMANDS  # the extraction finds them (a change of format would hide them all)
    assert ("docs/mindspore.md:6", "hpclaunch submit recipes/gpt_mindspore --profile dev-slurm --preset tiny --nodes 2 "
            "--gpus-per-node 2") in COMMANDS
    assert ("README.md:53", "hpclaunch jobs") in COMMANDS  # one of `a ; b ; c`
    assert any(assignments_of(c) == {"HPCLAUNCH_PATH": "tests/fixtures"} for _, c in COMMANDS)  # quickstart's Slurm run


def _cannot(command: str) -> str | None:
    return next((why for pattern, why in CANNOT_RUN.items() if re.search(pattern, command)), None)


RUNNABLE = [(where, c) for where, c in COMMANDS if _cannot(c) is None]

TRAIN_PY = '''"""The docs' own script (`hpclaunch submit train.py`): reads its arguments and ends."""
import argparse
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=1)
p.add_argument("--name", default="x")
p.add_argument("--lr", type=float, default=1e-3)
print(p.parse_args())
'''


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A home with one real job (gpt2 tiny on the local profile, 2 CPU ranks, a checkpoint at the end), its
    export-run archive, and a working folder with the docs' train.py."""
    from click.testing import CliRunner

    from hpclaunch.cli.main import cli

    root = tmp_path_factory.mktemp("docs-commands")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCLAUNCH_HOME", str(root / "home"))
        mp.setenv("HPCLAUNCH_PATH", str(REPO / "tests" / "fixtures"))
        mp.setenv("XDG_CONFIG_HOME", str(root / "xdg-config"))
        mp.setenv("HOME", str(root / "user"))  # the docs write ~/.config/hpclaunch/..., stores are under ~
        work = root / "work"
        (work / "path" / "to").mkdir(parents=True)
        for script in (work / "train.py", work / "path" / "to" / "train.py"):
            script.write_text(TRAIN_PY)
        mp.chdir(work)
        runner = CliRunner()

        def run(*args: str) -> object:
            return runner.invoke(cli, list(args), catch_exceptions=False, prog_name="hpclaunch")

        done = run("submit", str(REPO / "recipes" / "gpt2"), "--profile", "local", "--preset", "tiny", "--set",
                   "train.max_steps=4", "--set", "train.log_every=1", "--follow")
        assert done.exit_code == 0, done.output[-3000:]
        job = re.search(r"submitted job (\S+) ", done.output)[1]
        run_dir = Path(re.search(r"run directory: (\S+)", done.output)[1])
        archive = run("export-run", job, "-o", str(work / "RUN.hpclaunch-run.tar.gz"))
        assert archive.exit_code == 0, archive.output
        sweep = run("submit", str(REPO / "recipes" / "gpt2"), "--profile", "local", "--preset", "tiny", "--set",
                    "train.max_steps=2", "--sweep", "train.lr=1e-4,3e-4", "--max-parallel", "1", "--follow")
        assert sweep.exit_code == 0, sweep.output[-3000:]
        # the plan of docs/plan.md reads Mixtral's config.json from the store (fetched from the hub where there is
        # network): brought in as the plan's hint says
        config = REPO / "tests" / "fixtures" / "configs" / "mixtral-8x7b" / "config.json"
        imported = run("assets", "import", str(config), "--model", "mistralai/Mixtral-8x7B-v0.1", "--profile",
                       "guangzhou-a800")
        assert imported.exit_code == 0, imported.output
        yield {"run": run, "job": job, "run_dir": run_dir, "work": work,
               "sweep": re.search(r"submitted (?:sweep|job array|job) ([\w.+-]+)", sweep.output)[1]}


def prepared(command: str, env: dict[str, object]) -> list[str]:
    """The command's words with the test's job, run directory and profiles in place of the docs' examples; a
    submit as a dry run."""
    args: list[str] = []
    for w in argv_of(command):
        if args and args[-1] in ("--profile", "-p"):
            w = PROFILE_WORDS.get(w, w)
        elif args and args[-1] == "--after":
            pass  # a Slurm job id, as the Slurm profiles' dry runs check it
        elif w in JOB_WORDS or w in SWEEP_WORDS:
            w = str(env["job" if w in JOB_WORDS else "sweep"])
        args.append(w.replace("RUN_DIR", str(env["run_dir"])).replace("~/.hpclaunch/runs/<run>", str(env["run_dir"])))
    if args[0] == "submit":
        args = [a for a in args if a != "--follow"]
        if "--dry-run" not in args:
            args.insert(1 if "--" not in args else args.index("--"), "--dry-run")
    if args == ["watch"]:
        args.append("--once")
    return args


@pytest.mark.parametrize("where, command", RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_the_command_runs(docs_env, where, command):
    args = prepared(command, docs_env)
    if args[0] == "export":  # each export of the docs writes the same folder, which export does not overwrite
        shutil.rmtree(Path(str(docs_env["run_dir"])) / "export", ignore_errors=True)
    environ = assignments_of(command)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in environ.items():
            mp.setenv(name, value)
        if environ:
            mp.chdir(REPO)
        result = docs_env["run"](*args)  # type: ignore[operator]
    expected = next((code for pattern, code in EXPECTED_CODE.items() if re.search(pattern, command)), 0)
    assert result.exit_code == expected, f"{where}: hpclaunch {shlex.join(args)}\n{result.output[-3000:]}"
    assert "Traceback" not in result.output


def test_every_command_that_cannot_run_here_is_listed_for_a_reason():
    """Each entry of CANNOT_RUN still matches a command the docs show (the list stays short and true)."""
    for pattern in CANNOT_RUN:
        assert any(re.search(pattern, c) for _, c in COMMANDS), pattern
