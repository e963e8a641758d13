"""Hostile values go through the rendered script and come back literally (submitit's hostile-path tests).

The whole rendered script is run under bash with stub `python` and `module` commands that record the
arguments and environment they receive; nothing in a value may run as a command.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpclaunch.config.base import validate
from hpclaunch.config.loader import RecipeSource
from hpclaunch.config.profile import Profile
from hpclaunch.core.shell import ShellExpr, join, quote
from hpclaunch.errors import ConfigError
from hpclaunch.submission.render import render
from hpclaunch.submission.resolve import CliOverrides, resolve_parts
from hpclaunch.submission.rundir import with_recipe_copy

REPO = Path(__file__).resolve().parents[2]

# Any text a shell variable can hold (no NUL), biased towards shell metacharacters.
_META = st.sampled_from(
    list("'\"\\$`;&|<>(){}[]*?!#~ \t\n\r%^=")
    + ["$(touch PWNED)", "`touch PWNED`", "é", "猫", "\u2028", "${HOME}", "\\n"]
)
TEXT = st.lists(
    st.one_of(_META, st.characters(exclude_categories=("Cs",), exclude_characters="\x00")),
    min_size=1,
    max_size=12,
).map("".join)
# A single path segment: no slash, not . or ..
SEGMENT = TEXT.filter(lambda s: "/" not in s and s not in (".", "..") and len(s.encode()) < 200)

HOSTILE = [
    "a'; echo foo",
    "a\n0",
    "$(touch PWNED)",
    "`touch PWNED`",
    "'; touch PWNED; '",
    '"; touch PWNED; "',
    "x\\",
    "--rm -rf /",
    "$HOME ${HOME} $((1+1))",
    "é猫\u2028z",
    "-n",
    "*",
]


def _bash_echo(values: list[str]) -> list[str]:
    script = "printf '%s\\0' " + join(values)
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    return out.decode("utf-8", "surrogateescape").split("\0")[:-1]


@settings(max_examples=150, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
@example(HOSTILE)
def test_quote_round_trips_through_bash(values):
    assert _bash_echo(values) == values


def test_shell_expr_expands_variables_and_refuses_the_rest():
    assert quote(ShellExpr("--node_rank=${SLURM_NODEID}")) == '"--node_rank=${SLURM_NODEID}"'
    out = subprocess.run(
        ["bash", "-c", "SLURM_NODEID=3; printf %s " + quote(ShellExpr("--r=${SLURM_NODEID}"))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "--r=3"
    for bad in ['"', "`id`", "$(id)", "\\", "${X:-`id`}", "${X:-$(id)}", "${X}${"]:
        with pytest.raises(ValueError):
            ShellExpr(bad)


STUBS = {
    # records its argv and the values the job exported, then exits 0
    "python": '#!/bin/bash\nprintf "%s\\0" "$@" > "$STUB_OUT/python.args"\n'
    'printf "%s\\0" "$HOSTILE_ENV" "$HPCLAUNCH_RUN_DIR" "$HPCLAUNCH_CONFIG" "$HPCLAUNCH_ASSET_STORE" '
    '"${ACTIVATED-}" > "$STUB_OUT/python.env"\n',
    "module": '#!/bin/bash\nprintf "%s\\0" "$@" >> "$STUB_OUT/module.args"\n',
}


def _stub_dir(root: Path) -> Path:
    stubs = root / "stubs"
    stubs.mkdir()
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    return stubs


def _read0(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1]


def _local_profile(env_value: str, modules: list[str], venv: str, store: str) -> Profile:
    data = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    data.update(
        name="local",
        env={"HOSTILE_ENV": env_value},
        modules={"load": modules},
        python={"venv": venv},
        assets={"store": store},
    )
    return validate(Profile, data, file="local.yaml")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env_value=TEXT, module=TEXT, arg=TEXT, run_name=SEGMENT, venv_name=SEGMENT)
@example(
    env_value="a'; touch PWNED; echo '",
    module="$(touch PWNED)",
    arg="`touch PWNED`",
    run_name="a'; echo foo",
    venv_name="a\n0",
)
@example(
    env_value="a\n0 $HOME",
    module="x; touch PWNED",
    arg="'\"$(touch PWNED)\"'",
    run_name="run\ntouch PWNED; #",
    venv_name="é猫 $(touch PWNED)",
)
def test_hostile_values_reach_the_job_literally(env_value, module, arg, run_name, venv_name):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stubs = _stub_dir(root)
        out = root / "out"
        out.mkdir()
        venv = root / venv_name
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "activate").write_text("export ACTIVATED=yes\n")
        store = str(root / "store") + "/" + run_name
        profile = _local_profile(env_value, [module], str(venv), store)
        recipe_dir = REPO / "tests" / "fixtures" / "recipes" / "allreduce"
        src = RecipeSource(
            dir=recipe_dir,
            file=recipe_dir / "recipe.yaml",
            data={
                "name": "allreduce",
                "script": "allreduce.py",
                "launcher": "torchrun",
                "task": "test",
                "args": [arg],
            },
        )
        spec = resolve_parts(profile, src, CliOverrides(layout="1n2g"))
        run_dir = root / "runs" / run_name
        job = render(with_recipe_copy(spec, run_dir), run_dir).script
        script = root / "job.sh"
        script.write_text(job)
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
        env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_OUT": str(out)}
        proc = subprocess.run(["bash", str(script)], cwd=root, env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert not list(root.rglob("PWNED")), "a value ran as a command"
        assert _read0(out / "module.args") == ["load", module]
        assert _read0(out / "python.env") == [
            env_value,
            str(run_dir),
            f"{run_dir}/resolved.yaml",
            store,
            "yes",
        ]
        assert _read0(out / "python.args") == [
            "-m",
            "hpclaunch.runtime.node.supervise",
            "--timeout=1800",
            "--init-timeout=3600",
            "--min-timeout=60",
            "--adaptive",
            "--ranks=1:2",
            "--",
            "python",
            "-m",
            "hpclaunch.runtime.node.rank_exec",
            f"{run_dir}/recipe/allreduce.py",
            "--config",
            f"{run_dir}/resolved.yaml",
            arg,
        ]


@pytest.mark.parametrize("name", ["a'; echo foo", "a\n0", "$(id)", "a b", "`id`", "é"])
def test_hostile_job_names_are_refused(name):
    recipe_dir = REPO / "tests" / "fixtures" / "recipes" / "allreduce"
    src = RecipeSource(
        dir=recipe_dir,
        file=recipe_dir / "recipe.yaml",
        data={"name": "allreduce", "script": "allreduce.py", "launcher": "torchrun"},
    )
    profile = _local_profile("x", [], "/venv", "/store")
    with pytest.raises(ConfigError, match="may hold only letters, digits and _ . \\+ -"):
        resolve_parts(profile, src, CliOverrides(name=name))


def test_a_line_break_cannot_reach_an_sbatch_line(hpc_home):
    from hpclaunch.submission.resolve import resolve

    spec = resolve("allreduce", "dev-slurm")
    with pytest.raises(ConfigError, match="#SBATCH --output holds a line break"):
        render(spec, Path("/runs/a\ntouch PWNED"))
