"""Defects found when hpclaunch was tried adversarially (the resilience issue, section 3): one test each.
Every user error exits 2 with one message naming what and where, no traceback, nothing left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpclaunch.config import yamlfile
from hpclaunch.schedulers import local as local_sched
from hpclaunch.state import registry
from hpclaunch.state.runfiles import RunFiles
from tests.fixtures.jobrecords import add_local_record

REPO = Path(__file__).resolve().parents[2]
ALLREDUCE = REPO / "tests" / "fixtures" / "recipes" / "allreduce"


def _error(result, *expected: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert result.stderr.startswith("hpclaunch: error: "), result.stderr
    for text in expected:
        assert text in result.stderr, f"{text!r} not in {result.stderr!r}"
    return result.stderr


def _nothing_left(hpc_home: Path) -> None:
    runs = hpc_home / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
    reg = hpc_home / "registry"
    assert not reg.exists() or not list(reg.glob("*.json"))


def _recipe(tmp_path: Path, name: str = "r", text: str | None = None, **over) -> Path:
    folder = tmp_path / name
    shutil.copytree(ALLREDUCE, folder)
    if text is not None:
        (folder / "recipe.yaml").write_text(text)
    else:
        data = yaml.safe_load((folder / "recipe.yaml").read_text())
        data.update(over)
        (folder / "recipe.yaml").write_text(yaml.safe_dump(data))
    return folder


def _profile(tmp_path: Path, base: str = "local", **over) -> Path:
    data = yaml.safe_load((REPO / "cluster_profiles" / f"{base}.yaml").read_text())
    data.update(over)
    path = tmp_path / f"prof-{base}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _dry(hpclaunch, *args):
    return hpclaunch("submit", *args, "--dry-run", "--json")


# 1. relative HPCLAUNCH_HOME / run_root ------------------------------------------------------------------


def test_relative_home_and_run_root_are_made_absolute(hpclaunch, hpc_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCLAUNCH_HOME", "rel-home")
    run = Path(json.loads(_dry(hpclaunch, "allreduce", "--profile", "local").stdout)["run_dir"])
    assert run.is_absolute() and run.parent == tmp_path / "rel-home" / "runs"
    assert f"export HPCLAUNCH_RUN_DIR={run}" in (run / "job.sbatch").read_text()
    prof = _profile(tmp_path, run_root="rel-runs")
    run = Path(json.loads(_dry(hpclaunch, "allreduce", "--profile", str(prof)).stdout)["run_dir"])
    assert run.parent == tmp_path / "rel-runs"


# 2. malformed registry records, a corrupt counter, cancel without a run dir ----------------------------


@pytest.mark.parametrize("content", ['{"job_id": "local-9", "sched', '{"job_id": "local-9"}', "[]", b"\xff\xfe"])
def test_a_malformed_record_is_skipped_in_listings_and_named_for_its_job(hpclaunch, hpc_home, tmp_path, content):
    add_local_record("local-1", tmp_path / "run1")
    bad = hpc_home / "registry" / "local-9.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    for command in (["jobs"], ["status"]):
        result = hpclaunch(*command)
        assert result.exit_code == 0, result.output
        assert "local-1" in result.stdout
        assert result.stderr.count("warning") == 1 and str(bad) in result.stderr
    for command in (["status", "local-9"], ["logs", "local-9"], ["cancel", "local-9"], ["report", "local-9"]):
        _error(hpclaunch(*command), str(bad), "unreadable job record", "delete it")


def test_unknown_scheduler_and_extra_keys_are_malformed(hpc_home, tmp_path):
    add_local_record("local-1", tmp_path / "run1")
    path = hpc_home / "registry" / "local-1.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "scheduler": "pbs"}))
    with pytest.raises(registry.RegistryError, match="unknown scheduler 'pbs'"):
        registry.get("local-1")
    path.write_text(json.dumps({**data, "colour": "red"}))
    with pytest.raises(registry.RegistryError, match="unknown keys colour"):
        registry.get("local-1")


def test_a_corrupt_local_counter_is_repaired(hpc_home, tmp_path):
    add_local_record("local-7", tmp_path / "run7")
    (hpc_home / "registry" / "local.counter").write_text("garbage\x00")
    assert registry.next_local_id() == "local-8"
    assert registry.next_local_id() == "local-9"


def test_cancel_of_a_local_job_whose_run_dir_is_gone_says_why(hpclaunch, hpc_home, tmp_path):
    add_local_record("local-3", tmp_path / "gone")
    _error(hpclaunch("cancel", "local-3"), "its run directory", "is gone", "kill -- -PGID")


def test_a_very_long_job_id_is_a_clear_error(hpclaunch, hpc_home):
    for command in ("status", "logs", "cancel"):
        _error(hpclaunch(command, "x" * 300), "is not a job id")


# 3. local status is exact -----------------------------------------------------------------------------


def test_a_job_that_ends_between_the_checks_is_completed_not_vanished(hpc_home, tmp_path, monkeypatch):
    run = tmp_path / "run"
    state = RunFiles(run).scheduler_state("local")
    state.mkdir(parents=True)
    (state / "job.json").write_text(json.dumps({"job_id": "local-1", "pgid": 999999, "started": time.time()}))
    add_local_record("local-1", run)

    def ends_now(pgid: int) -> bool:  # the job writes its exit code and its group ends right here
        (state / "exitcode").write_text("0\n")
        return False

    monkeypatch.setattr(local_sched, "_alive", ends_now)
    assert local_sched.LocalScheduler().status(["local-1"])["local-1"].state == "COMPLETED"


def test_many_fast_local_jobs_all_complete(hpc_home, tmp_path):
    scheduler = local_sched.LocalScheduler()
    jobs = []
    for i in range(12):
        run = tmp_path / f"run{i}"
        (run / "logs").mkdir(parents=True)
        script = run / "job.sbatch"
        script.write_text(f"exit {i % 2}\n")
        job_id = scheduler.submit(script, run)
        add_local_record(job_id, run)
        jobs.append((job_id, i % 2))
    deadline = time.monotonic() + 30
    pending = dict(jobs)
    while pending and time.monotonic() < deadline:
        for job_id, status in scheduler.status(list(pending)).items():
            assert status.state in ("RUNNING", "COMPLETED", "FAILED"), status
            if status.finished:
                want = "COMPLETED" if pending[job_id] == 0 else "FAILED"
                assert status.state == want and status.reason is None, status
                del pending[job_id]
    assert not pending


# 4. a resubmitted resolved.yaml is validated as a fresh resolve ---------------------------------------


def _resolved(hpclaunch) -> Path:
    out = json.loads(_dry(hpclaunch, "allreduce", "--profile", "dev-slurm").stdout)
    return Path(out["run_dir"]) / "resolved.yaml"


def _edit(path: Path, **changes) -> None:
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    path.write_text(yaml.safe_dump(data))


def test_a_hand_edited_resolved_yaml_goes_through_resolve_checks(hpclaunch, hpc_home):
    path = _resolved(hpclaunch)
    _edit(path, name="../../x")
    _error(_dry(hpclaunch, str(path)), "job name '../../x' may hold only")
    path = _resolved(hpclaunch)
    _edit(path, nodes=9)
    _error(_dry(hpclaunch, str(path)), "allows at most 4")
    path = _resolved(hpclaunch)
    _edit(path, **{"recipe.script": "../x.py"})
    _error(_dry(hpclaunch, str(path)), "not a file inside the recipe folder")


def test_flags_apply_to_a_resolved_yaml(hpclaunch, hpc_home):
    path = _resolved(hpclaunch)
    out = json.loads(_dry(hpclaunch, str(path), "--layout", "2n1g", "--set", "train.lr=0.5").stdout)
    spec = yaml.safe_load((Path(out["run_dir"]) / "resolved.yaml").read_text())
    assert (spec["nodes"], spec["gpus_per_node"], spec["recipe"]["train"]["lr"]) == (2, 1, 0.5)
    assert spec["sets"] == ["train.lr=0.5"]
    _error(_dry(hpclaunch, str(path), "--layout", "9n1g"), "allows at most 4")
    _error(_dry(hpclaunch, str(path), "--preset", "slow"), "--preset cannot apply to a resolved.yaml")


# 5. files that are not UTF-8 --------------------------------------------------------------------------


def test_a_profile_or_recipe_that_is_not_utf8(hpclaunch, hpc_home, tmp_path, monkeypatch):
    root = tmp_path / "site"
    (root / "cluster_profiles").mkdir(parents=True)
    (root / "cluster_profiles" / "latin.yaml").write_bytes(b"description: caf\xe9\n")
    folder = root / "recipes" / "latin"
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_bytes(b"description: caf\xe9\n")
    monkeypatch.setenv("HPCLAUNCH_PATH", f"{root}:{REPO / 'tests' / 'fixtures'}")
    _error(_dry(hpclaunch, "allreduce", "--profile", "latin"), "latin.yaml", "not UTF-8", "line 1")
    _error(_dry(hpclaunch, "latin", "--profile", "local"), "recipe.yaml", "not UTF-8")
    for kind, good in (("profiles", "local"), ("recipes", "allreduce")):
        result = hpclaunch(kind, "list")
        assert result.exit_code == 0 and good in result.stdout and "latin" not in result.stdout
        assert "warning: skipped" in result.stderr and "not UTF-8" in result.stderr
    _nothing_left(hpc_home)


# 6. YAML: alias bombs, duplicate keys ------------------------------------------------------------------


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def test_an_alias_bomb_is_refused_quickly(hpclaunch, hpc_home, tmp_path):
    env = "env:\n" + "".join(f"  {line}\n" for line in BOMB.splitlines())
    folder = _recipe(tmp_path, text=(ALLREDUCE / "recipe.yaml").read_text() + env)
    start = time.monotonic()
    _error(_dry(hpclaunch, str(folder), "--profile", "local"), str(folder / "recipe.yaml"),
           "aliases expand this document")
    assert time.monotonic() - start < 2
    assert yamlfile.load("base: &b {x: 1}\none: *b\ntwo: {<<: *b, y: 2}") == {
        "base": {"x": 1}, "one": {"x": 1}, "two": {"x": 1, "y": 2}}
    _nothing_left(hpc_home)


def test_a_recursive_alias_is_refused(hpclaunch, hpc_home, tmp_path):
    # `&a [*a]` is a list that contains itself: walking it never ends (it once ate all memory)
    folder = _recipe(tmp_path, text=(ALLREDUCE / "recipe.yaml").read_text() + "env:\n  X: &a [*a]\n")
    _error(_dry(hpclaunch, str(folder), "--profile", "local"), str(folder / "recipe.yaml"),
           "a value that contains it")
    _nothing_left(hpc_home)
    with pytest.raises(yaml.YAMLError, match="a value that contains it"):
        yamlfile.load("x: &a {k: *a}")


def test_a_duplicate_key_is_an_error_with_file_line_and_key(hpclaunch, hpc_home, tmp_path):
    text = (ALLREDUCE / "recipe.yaml").read_text() + "train:\n  lr: 0.1\n  lr: 0.2\n"
    folder = _recipe(tmp_path, text=text)
    _error(_dry(hpclaunch, str(folder), "--profile", "local"), str(folder / "recipe.yaml"), "line 13",
           "duplicate key 'lr'")


# 7. the script lies inside the recipe folder -----------------------------------------------------------


def test_a_script_outside_the_recipe_folder_is_refused(hpclaunch, hpc_home, tmp_path):
    folder = _recipe(tmp_path, script="../x.py")
    (tmp_path / "x.py").write_text("print(1)\n")
    _error(_dry(hpclaunch, str(folder), "--profile", "local"), "'../x.py' is not a file inside the recipe folder")
    _error(_dry(hpclaunch, "allreduce", "--profile", "local", "--set", "script=/etc/passwd"),
           "--set script=/etc/passwd")
    _nothing_left(hpc_home)


# 8. tracebacks that were ------------------------------------------------------------------------------


def test_inputs_that_raised_tracebacks_are_clear_errors(hpclaunch, hpc_home, tmp_path, monkeypatch):
    folder = _recipe(tmp_path, default_preset={})
    _error(_dry(hpclaunch, str(folder), "--profile", "local"), "default_preset", "expected the name of a preset")
    _error(_dry(hpclaunch, "allreduce", "--profile", "local", "--set", "train.max_steps=" + "9" * 5000),
           "train.max_steps")
    _error(_dry(hpclaunch, "r" * 300, "--profile", "local"), "too long")
    _error(_dry(hpclaunch, "allreduce", "--profile", "local", "--set", "script=a" + "9" * 300),
           "the recipe's script 'a999", "cannot be a file in", "File name too long")  # found by test_fuzz_cli
    _error(_dry(hpclaunch, "allreduce", "--profile", "p" * 300), "unknown profile")
    _error(_dry(hpclaunch, "allreduce", "--profile", "p" * 300 + ".yaml"), "too long")
    _error(_dry(hpclaunch, "~nouser-hpclaunch/x", "--profile", "local"), "no such user")
    _error(_dry(hpclaunch, "allreduce", "--profile", str(_profile(tmp_path, run_root="~nouser-hpclaunch/r"))),
           "no such user")
    _nothing_left(hpc_home)
    home_file = tmp_path / "home-is-a-file"
    home_file.write_text("")
    monkeypatch.setenv("HPCLAUNCH_HOME", str(home_file))
    _error(_dry(hpclaunch, "allreduce", "--profile", "local"), "is not a folder", "HPCLAUNCH_HOME")
    _error(hpclaunch("jobs"), "is not a folder")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        monkeypatch.setenv("HPCLAUNCH_HOME", str(locked))
        _error(_dry(hpclaunch, "allreduce", "--profile", "local"), "not writable")


# 9. values that were accepted silently -----------------------------------------------------------------


@pytest.mark.parametrize("value", [["a", "b"], {"k": "v"}, None])
def test_profile_env_values_must_be_text(hpclaunch, hpc_home, tmp_path, value):
    prof = _profile(tmp_path, env={"GOOD": 1, "BAD": value})
    _error(_dry(hpclaunch, "allreduce", "--profile", str(prof)), "env", "'BAD'", "quoted string")


@pytest.mark.parametrize("value", ["inf", ".inf", "nan", "-.inf"])
def test_lr_must_be_finite(hpclaunch, hpc_home, value):
    _error(_dry(hpclaunch, "allreduce", "--profile", "local", "--set", f"train.lr={value}"), "train.lr")


def test_every_preset_is_validated(hpclaunch, hpc_home, tmp_path):
    folder = _recipe(tmp_path, presets={"ok": {"train": {"lr": 0.1}}, "broken": {"train": {"lr": "fast"}}})
    _error(_dry(hpclaunch, str(folder), "--profile", "local", "--preset", "ok"), "(presets.broken)", "train.lr")


def test_devices_per_node_have_an_upper_bound(hpclaunch, hpc_home, tmp_path):
    prof = _profile(tmp_path, partitions={"local": {"gpus_per_node": 80, "cpus_per_node": 2}})
    _error(_dry(hpclaunch, "allreduce", "--profile", str(prof)), "gpus_per_node", "at most 64", "a typo?")


# 10. python environment ---------------------------------------------------------------------------------


def test_a_missing_venv_is_warned_on_dry_run_and_refused_on_submit(hpclaunch, hpc_home, tmp_path):
    prof = _profile(tmp_path, python={"venv": str(tmp_path / "no-venv")})
    result = hpclaunch("submit", "allreduce", "--profile", str(prof), "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'no-venv' / 'bin' / 'activate'} does not exist" in result.stderr
    assert "HPCLAUNCH_NO_ENV_CHECK=1" in result.stderr
    shutil.rmtree(hpc_home / "runs")
    _error(hpclaunch("submit", "allreduce", "--profile", str(prof)), "does not exist", "another machine")
    _nothing_left(hpc_home)
    far = _profile(tmp_path, python={"venv": "/no/such/mount/venv"})  # not visible from here: the job checks it
    assert "does not exist" not in hpclaunch("submit", "allreduce", "--profile", str(far), "--dry-run").stderr


def test_the_job_stops_at_a_failed_activation(hpclaunch, hpc_home, tmp_path):
    prof = _profile(tmp_path, python={"venv": "/no/such/mount/venv"})
    run = Path(json.loads(_dry(hpclaunch, "allreduce", "--profile", str(prof)).stdout)["run_dir"])
    script = (run / "job.sbatch").read_text()
    block = script[script.index("# --- python environment"):script.index("# --- environment")]
    proc = subprocess.run(["bash", "-c", block + "echo reached"], capture_output=True, text=True)
    assert proc.returncode == 2 and "reached" not in proc.stdout
    assert "hpclaunch: error: cannot activate the python environment /no/such/mount/venv/bin/activate" in proc.stderr


# 11. backslashes in #SBATCH values ----------------------------------------------------------------------


def test_sbatch_values_with_backslashes_are_escaped_for_sbatch(hpc_home):
    from hpclaunch.schedulers.slurm.scheduler import sbatch_options
    from hpclaunch.submission.resolve import resolve

    spec = resolve("allreduce", "dev-slurm")
    options = sbatch_options(spec, Path("/runs/a\\b"))
    assert "--output='/runs/a\\\\b/logs/job.%j.out'" in options


# 12. the record exists before the submission -------------------------------------------------------------


def _pending(hpc_home: Path, run: Path) -> Path:
    pending = registry.begin(registry.JobRecord("", "local", "local", "allreduce", None, "torchrun", "1n2g",
                                                "allreduce", str(run), "2026-01-01T00:00:00+0000"))
    pending._handle.close()  # the submitting process was killed: its lock is gone
    return pending.path


def test_a_killed_submit_leaves_a_record_that_is_settled(hpclaunch, hpc_home, tmp_path):
    queued = tmp_path / "queued"
    state = RunFiles(queued).scheduler_state("local")
    state.mkdir(parents=True)
    (state / "job.json").write_text(json.dumps({"job_id": "local-5", "pgid": 999999, "started": 0}))
    _pending(hpc_home, queued)
    never = tmp_path / "never"
    never.mkdir()
    _pending(hpc_home, never)
    result = hpclaunch("jobs")
    assert result.exit_code == 0, result.output
    assert "local-5" in result.stdout
    assert "recorded it now" in result.stderr and "never completed" in result.stderr
    assert not never.exists()
    assert sorted(p.name for p in (hpc_home / "registry").glob("*.json")) == ["local-5.json"]


def test_a_submission_in_progress_is_shown_as_such(hpclaunch, hpc_home, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    pending = registry.begin(registry.JobRecord("", "local", "local", "allreduce", None, "torchrun", "1n2g",
                                                "allreduce", str(run), "2026-01-01T00:00:00+0000"))
    try:
        result = hpclaunch("jobs")
        assert "SUBMITTING" in result.stdout and run.exists()
        _error(hpclaunch("cancel", pending.record.job_id), "still being handed to the scheduler")
    finally:
        pending.abandon()


def test_submit_records_the_job_before_the_scheduler_is_asked(hpc_home, monkeypatch):
    from hpclaunch.schedulers.local import LocalScheduler
    from hpclaunch.submission import submit as submission
    from hpclaunch.submission.resolve import resolve

    seen = []

    def fake_submit(self, script, run_dir, after=()):
        seen.extend(p.name for p in (hpc_home / "registry").glob("pending-*.json"))
        return "local-77"

    monkeypatch.setattr(LocalScheduler, "submit", fake_submit)
    done = submission.submit(resolve("allreduce", "local"))
    assert seen == [f"pending-{done.run_dir.name}.json"]
    assert [p.name for p in (hpc_home / "registry").glob("*.json")] == ["local-77.json"]


# 13. more checks before queueing ------------------------------------------------------------------------


def test_override_config_missing_or_with_unknown_keys(hpclaunch, hpc_home, tmp_path):
    store = tmp_path / "store"
    model = store / "models" / "gpt2" / "main"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"n_layer": 12, "n_head": 12, "n_embd": 768}))
    prof = _profile(tmp_path, assets={"store": str(store)})
    folder = _recipe(tmp_path, task="causal-lm", model={"repo": "gpt2", "override_config": "override.json"})
    _error(_dry(hpclaunch, str(folder), "--profile", str(prof)), "override.json", "does not exist")
    (folder / "override.json").write_text('{"num_layers": 2}')
    _error(_dry(hpclaunch, str(folder), "--profile", str(prof)), "'num_layers': not a key of the gpt2 config",
           "valid keys: ", "n_layer")
    (folder / "override.json").write_text('{"n_layer": 2, "num_hidden_layers": 2, "torch_dtype": "bfloat16"}')
    result = hpclaunch("submit", str(folder), "--profile", str(prof), "--dry-run")
    assert result.exit_code == 0, result.output


def test_ascend_device_counts_per_node(hpclaunch, hpc_home):
    _error(_dry(hpclaunch, "allreduce", "--profile", "ascend-910", "--layout", "1n3g"), "3 devices per node",
           "1, 2, 4, 8")
    assert _dry(hpclaunch, "allreduce", "--profile", "ascend-910", "--layout", "1n4g").exit_code == 0


@pytest.mark.parametrize("launcher, expected", [
    ("torchrun", "its script implements data parallelism only"),
    ("deepspeed", "DeepSpeed shards with ZeRO and would ignore it")])
def test_parallel_settings_on_a_launcher_that_ignores_them(hpclaunch, hpc_home, tmp_path, launcher, expected):
    folder = _recipe(tmp_path, launcher=launcher, parallel={"model_parallel": 2})
    _error(_dry(hpclaunch, str(folder), "--profile", "local"), "parallel", expected)


# 14. Ascend: visible devices from Slurm's allocation --------------------------------------------------


def test_ascend_devices_come_from_the_slurm_allocation(hpclaunch, hpc_home):
    run = Path(json.loads(_dry(hpclaunch, "allreduce", "--profile", "ascend-910", "--layout", "1n2g").stdout)
               ["run_dir"])
    script = (run / "job.sbatch").read_text()
    # the launch step's: the node health step's, before it, starts alike
    line = [x for x in script.splitlines() if x.startswith("  bash -c 'export HPCLAUNCH_NODE_RANK")][-1]
    prefix = line.split("'", 1)[1].split("\n")[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_", "HPCLAUNCH_DEV"))}
    for given, want in (({"SLURM_STEP_GPUS": "4,5"}, "4,5"), ({"SLURM_JOB_GPUS": "6,7"}, "6,7"),
                        ({"CUDA_VISIBLE_DEVICES": "0,1"}, "0,1"), ({}, "0,1")):
        proc = subprocess.run(["bash", "-c", prefix + '; echo "$ASCEND_RT_VISIBLE_DEVICES"'],
                              env={**env, "SLURM_NODEID": "0", **given}, capture_output=True, text=True)
        assert proc.stdout.strip() == want, (given, proc.stdout, proc.stderr)


def test_cli_imports_stay_light_after_the_fixes():
    code = ("import sys; from hpclaunch.cli.main import cli; from hpclaunch import submit; "
            "from hpclaunch.state import registry; "
            "print(any(m in sys.modules for m in ('torch', 'transformers', 'deepspeed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("where, value", [
    (("python", "conda_env"), "base\x00evil"),
    (("modules", "load"), ["gcc/12", "cuda\x00/12"]),
    (("env",), {"NCCL_DEBUG": "INFO\x00"}),
    (("run_root",), "/scratch/\x00runs"),
])
def test_a_nul_byte_in_a_profile_is_refused_where_it_is_read(hpclaunch, hpc_home, tmp_path, where, value):
    """A NUL byte can reach neither a path nor a command line (subprocess raises "embedded null byte"): the profile
    is refused when it is read, naming the file and the key, for `profiles check` and `submit` alike."""
    profile = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    section = profile
    for key in where[:-1]:
        section = section.setdefault(key, {})
    section[where[-1]] = value
    path = tmp_path / "nul.yaml"
    path.write_text(yaml.safe_dump(profile))
    key = ".".join(where)
    for args in (("profiles", "check", str(path)), ("submit", str(ALLREDUCE), "--profile", str(path))):
        _error(hpclaunch(*args), str(path), key, "NUL byte")
    _nothing_left(hpc_home)


def test_an_injected_fault_on_a_rank_the_job_does_not_have_is_refused(hpclaunch, hpc_home, monkeypatch):
    monkeypatch.setenv("HPCLAUNCH_INJECT", "kill:5:3")
    _error(hpclaunch("submit", str(ALLREDUCE), "--profile", "local", "--layout", "1n2g"),
           "HPCLAUNCH_INJECT", "kill:5:3 names rank 5, but the job has 2 ranks (0 to 1)")
    monkeypatch.setenv("HPCLAUNCH_INJECT", "sick:1:0")  # before step 0: a node of the allocation
    _error(hpclaunch("submit", str(ALLREDUCE), "--profile", "local", "--layout", "1n2g"),
           "sick:1:0 names node 1, but the job has 1 nodes")
    _nothing_left(hpc_home)


def test_a_rehearsal_and_a_local_job_mark_no_node_suspect(hpc_home):
    """An injected fault was made on a healthy node, and a local job's "node" is this machine: neither is
    remembered; a Slurm job's real fault is, and only Slurm submissions leave it out."""
    from hpclaunch import api
    from hpclaunch.state import suspects

    assert "rehearsal" in suspects.not_remembered({"HPCLAUNCH_INJECT": "kill:1:8", "HPCLAUNCH_SCHEDULER": "slurm"})
    assert "does not leave nodes out" in suspects.not_remembered({"HPCLAUNCH_SCHEDULER": "local"})
    assert suspects.not_remembered({"HPCLAUNCH_SCHEDULER": "slurm"}) is None
    os.environ["HPCLAUNCH_SCHEDULER"] = "slurm"
    try:
        suspects.remember(["node3"], "device error", "12")
    finally:
        del os.environ["HPCLAUNCH_SCHEDULER"]
    assert suspects.excluded("slurm") == suspects.excluded("slurm-rest") == ["node3"]
    assert [s.node for s in api.suspects()] == ["node3"] and api.suspects()[0].scheduler == "slurm"
    assert api.clear_suspects() == ["node3"] and api.suspects() == []
