"""`hpclaunch submit SCRIPT.py --launcher torchrun|deepspeed -- ARGS`: a user's own script as an ad-hoc recipe.
The launch line passes the script its own arguments only (hpclaunch's config comes through HPCLAUNCH_CONFIG),
the run directory keeps a copy of the script's folder (within a size limit) and a resolved.yaml that reruns it,
and the script runs in that copy, so it opens the files beside it as it would at home; bad input exits 2
writing nothing; and a plain argparse script really runs under torchrun with 2 ranks on the local profile."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from hpclaunch.runtime.train.job import load_job, parse_args

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "scripts" / "plain_allreduce.py"


def _launch_line(script_text: str) -> str:
    """The one command each node runs, from the comment above the launch."""
    (line,) = [ln for ln in script_text.splitlines() if ln.startswith("#   exec ")]
    return line


def _run_dir(stderr: str) -> Path:
    match = re.search(r"run directory (\S+)", stderr)
    assert match, stderr
    return Path(match.group(1))


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """The user's script in a folder of its own, beside the files it reads (seed 000's override_config.json, a
    data file in a subfolder) and what no job needs (its git history, Python's caches)."""
    folder = tmp_path / "my project"
    (folder / "data").mkdir(parents=True)
    (folder / "override_config.json").write_text('{"num_hidden_layers": 1}\n')
    (folder / "data" / "small.bin").write_bytes(b"\0" * 1024)
    for skipped in (".git/objects/ab", "__pycache__"):
        (folder / skipped).mkdir(parents=True)
        (folder / skipped / "x.pyc").write_bytes(b"\0")
    return Path(shutil.copy(SCRIPT, folder / "train-it.py"))


def test_dry_run_passes_the_scripts_own_args_intact(hpclaunch, script):
    r = hpclaunch("submit", str(script), "--profile", "local", "--layout", "1n2g", "--dry-run",
                  "--", "--steps", "3", "--name", "x y", "--config", "mine")
    assert r.exit_code == 0, r.output
    run_dir = _run_dir(r.stderr)
    copied = run_dir / "recipe" / "train-it.py"
    # the script's args follow the script directly: no --config RUN_DIR/resolved.yaml of hpclaunch's in front
    assert _launch_line(r.stdout).endswith(f" -m hpclaunch.runtime.node.rank_exec {copied} --steps 3 --name 'x y' "
                                           "--config mine")
    assert "--ranks=1:2 -- " in _launch_line(r.stdout)  # the supervisor starts the two ranks (launch.agent auto)
    assert f"export HPCLAUNCH_CONFIG={run_dir / 'resolved.yaml'}" in r.stdout
    # the script's folder is copied, as a recipe's is (without version control and caches), and the ranks
    # run in the copy
    copy = run_dir / "recipe"
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == [
        "data", "data/small.bin", "override_config.json", "train-it.py"]
    assert copied.read_text() == script.read_text()
    assert f"#   cd {copy} || exit 1" in r.stdout
    resolved = yaml.safe_load((run_dir / "resolved.yaml").read_text())
    assert resolved["name"] == "train-it"
    assert {k: resolved["recipe"][k] for k in ("name", "script", "launcher", "adhoc", "args")} == {
        "name": "train-it", "script": "train-it.py", "launcher": "torchrun", "adhoc": True,
        "args": ["--steps", "3", "--name", "x y", "--config", "mine"]}


def test_the_resolved_yaml_reruns_it_and_new_args_replace_the_old(hpclaunch, script):
    first = hpclaunch("submit", str(script), "--profile", "local", "--dry-run", "--", "--steps", "3", "--name", "x")
    resolved = _run_dir(first.stderr) / "resolved.yaml"
    again = hpclaunch("submit", str(resolved), "--dry-run")
    assert again.exit_code == 0, again.output
    copy = _run_dir(again.stderr) / "recipe" / "train-it.py"
    assert _launch_line(again.stdout).endswith(f"rank_exec {copy} --steps 3 --name x")
    other = hpclaunch("submit", str(resolved), "--dry-run", "--", "--steps", "7", "--name", "z")
    assert _launch_line(other.stdout).endswith(" --steps 7 --name z")


def test_deepspeed_script_gets_only_its_args_and_a_ds_config(hpclaunch, script):
    r = hpclaunch("submit", str(script), "--profile", "local", "--launcher", "deepspeed", "--layout", "1n2g",
                  "--set", "deepspeed.zero_stage=1", "--dry-run", "--", "--steps", "1", "--name", "d")
    assert r.exit_code == 0, r.output
    run_dir = _run_dir(r.stderr)
    assert _launch_line(r.stdout).endswith("train-it.py --steps 1 --name d")
    assert (run_dir / "ds_config.json").is_file()


def test_sweep_of_a_script(hpclaunch, script):
    r = hpclaunch("submit", str(script), "--profile", "local", "--sweep", "train.seed=1,2", "--dry-run",
                  "--", "--steps", "1", "--name", "s")
    assert r.exit_code == 0, r.output
    sweep_dir = Path(re.search(r"sweep folder (\S+)", r.stderr).group(1))  # type: ignore[union-attr]
    for element in ("element-0", "element-1"):  # each element: its own copy of the script, the args intact
        copy = sweep_dir / element / "recipe" / "train-it.py"
        assert copy.is_file()
        assert _launch_line((sweep_dir / element / "job.sbatch").read_text()).endswith(f"{copy} --steps 1 --name s")


@pytest.mark.parametrize(("target", "extra", "message"), [
    ("missing.py", (), "no such script"),
    ("notes.txt", ("--launcher", "torchrun"), "is not a Python script (.py)"),
    ("notes.txt", (), "neither a recipe folder"),
    ("train-it.py", ("--launcher", "msrun"), "--launcher msrun: a script runs under torchrun or deepspeed"),
])
def test_bad_script_input_is_refused_writing_nothing(hpclaunch, hpc_home, script, target, extra, message):
    (script.parent / "notes.txt").write_text("not python\n")
    r = hpclaunch("submit", str(script.parent / target), "--profile", "local", *extra, "--dry-run")
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.output
    assert not (hpc_home / "runs").exists() or not any((hpc_home / "runs").iterdir())


def test_launcher_is_refused_for_a_recipe(hpclaunch, hpc_home):
    r = hpclaunch("submit", "allreduce", "--profile", "local", "--launcher", "deepspeed", "--dry-run")
    assert r.exit_code == 2 and "is not a Python script (.py)" in r.stderr


def test_a_recipe_script_finds_its_config_in_the_environment(hpclaunch, monkeypatch):
    r = hpclaunch("submit", "allreduce", "--profile", "local", "--dry-run")
    resolved = _run_dir(r.stderr) / "resolved.yaml"
    monkeypatch.setenv("HPCLAUNCH_CONFIG", str(resolved))
    monkeypatch.delenv("HPCLAUNCH_RUN_DIR", raising=False)
    job = load_job(parse_args([]))
    assert job.spec.recipe.name == "allreduce" and job.run_dir == resolved.parent


def test_a_plain_argparse_script_runs_under_torchrun_with_two_ranks(hpclaunch, script):
    r = hpclaunch("submit", str(script), "--profile", "local", "--layout", "1n2g", "--follow",
                  "--", "--steps", "3", "--name", "x")
    assert r.exit_code == 0, r.output
    run_dir = Path(re.search(r"run directory: (\S+)", r.stdout).group(1))  # type: ignore[union-attr]
    config = run_dir / "resolved.yaml"
    for rank in (0, 1):  # (1 + 2) all-reduced 3 times: 3, 6, 12; each rank parsed its own arguments
        assert f"rank={rank} world=2 steps=3 name=x sum=12 config={config}" in r.stdout


def test_a_folder_too_large_to_copy_is_refused_writing_nothing(hpclaunch, hpc_home, script, monkeypatch):
    from hpclaunch.submission import rundir

    monkeypatch.setattr(rundir, "SCRIPT_FOLDER_MAX_BYTES", 1500)  # the script and override fit, not the data
    r = hpclaunch("submit", str(script), "--profile", "local", "--dry-run")
    assert r.exit_code == 2, r.output
    assert f"the folder of train-it.py, {script.parent}, holds more than 0 MiB" in r.stderr
    assert "put the script and the files it reads in a folder of their own" in r.stderr
    assert not (hpc_home / "runs").exists() or not any((hpc_home / "runs").iterdir())
    monkeypatch.setattr(rundir, "SCRIPT_FOLDER_MAX_BYTES", 100 << 20)
    monkeypatch.setattr(rundir, "SCRIPT_FOLDER_MAX_FILES", 2)
    r = hpclaunch("submit", str(script), "--profile", "local", "--dry-run")
    assert r.exit_code == 2 and "holds more than 2 files" in r.stderr, r.output


def test_the_run_root_inside_the_folder_is_left_out_and_a_linked_folder_stays_a_link(hpclaunch, script, tmp_path,
                                                                                   monkeypatch):
    folder = script.parent
    monkeypatch.setenv("HPCLAUNCH_HOME", str(folder / "state"))  # runs land in the very folder that is copied
    (tmp_path / "scratch-data").mkdir()
    (tmp_path / "scratch-data" / "big.bin").write_bytes(b"\0" * 4096)
    (folder / "data" / "scratch").symlink_to("../../scratch-data")  # relative: it would break in a copy
    for _ in range(2):
        r = hpclaunch("submit", str(script), "--profile", "local", "--dry-run", "--json")
        assert r.exit_code == 0, r.output
    copy = Path(json.loads(r.stdout)["run_dir"]) / "recipe"
    assert not (copy / "state" / "runs").exists()
    link = copy / "data" / "scratch"
    assert link.is_symlink() and link.resolve() == (tmp_path / "scratch-data").resolve()
    assert (link / "big.bin").stat().st_size == 4096


def test_the_script_runs_in_its_folder_and_opens_the_files_beside_it(hpclaunch, tmp_path):
    """Seed 000's main_hf.py reads override_config.json by a relative path (and skips it silently when absent)."""
    folder = tmp_path / "seed000"
    folder.mkdir()
    (folder / "override_config.json").write_text('{"num_hidden_layers": 1, "attention_dropout": 0.0}\n')
    (folder / "main_hf.py").write_text(
        "import json, os\n"
        "found = os.path.exists('override_config.json')\n"
        "override = json.load(open('override_config.json', encoding='utf8')) if found else None\n"
        "print(f\"rank={os.environ['RANK']} override={override}\", flush=True)\n")
    r = hpclaunch("submit", str(folder / "main_hf.py"), "--profile", "local", "--layout", "1n1g", "--follow")
    assert r.exit_code == 0, r.output
    assert "rank=0 override={'num_hidden_layers': 1, 'attention_dropout': 0.0}" in r.stdout
