"""Scheduler differences are capabilities of the backend, never comparisons of scheduler names (DESIGN.md rule 13,
hpclaunch/core/backends.py): no code outside the backends compares anything to a scheduler's name, and a new
backend (a PBS sketch here) is its own package plus one line in the table."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from hpclaunch.config.base import validate
from hpclaunch.config.profile import Profile
from hpclaunch.core import backends
from hpclaunch.core.backends import SCHEDULERS, Backend, can
from hpclaunch.errors import ConfigError
from hpclaunch.schedulers import get_scheduler
from hpclaunch.schedulers.base import Scheduler

PACKAGE = Path(__file__).resolve().parents[2] / "hpclaunch"
NAMES = {"local", "slurm", "slurm-rest"}
ALLOWED = (PACKAGE / "schedulers", PACKAGE / "core" / "backends.py")


def _names_compared(tree: ast.AST) -> list[int]:
    """Lines where a scheduler's name is compared to something: `x == "local"`, `"slurm" != x`,
    `x in ("slurm", "slurm-rest")`."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                        for op in node.ops):
            continue
        for side in (node.left, *node.comparators):
            items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(i, ast.Constant) and i.value in NAMES for i in items):
                lines.append(node.lineno)
    return lines


def test_nothing_outside_the_backends_compares_scheduler_names():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py")) if not any(path.is_relative_to(a) for a in ALLOWED)
             for line in _names_compared(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "ask core.backends.can(scheduler, capability) instead of comparing names"


def test_the_check_sees_each_form_of_comparison():
    code = 'a == "local"\n"slurm" != b\nc in ("slurm", "slurm-rest")\nd not in {"x"}\ne == "localhost"\n'
    assert _names_compared(ast.parse(code)) == [1, 2, 3]


def test_capabilities_answer_from_the_table():
    assert can("slurm", "ssh") and not can("slurm-rest", "ssh") and not can("local", "multi_node")
    assert get_scheduler("slurm-rest").capabilities == SCHEDULERS["slurm-rest"].capabilities
    assert "exclude_nodes" in get_scheduler("slurm").capabilities and not can("local", "exclude_nodes")
    with pytest.raises(ValueError, match="unknown capability 'gpus'"):
        can("slurm", "gpus")
    with pytest.raises(ValueError, match="unknown capabilities teleport"):
        Backend("x:Y", frozenset({"arrays", "teleport"}))


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_a_backend_declares_arrays_where_it_can_run_them(name):
    scheduler = get_scheduler(name)
    assert can(name, "arrays") == (type(scheduler).submit_array is not Scheduler.submit_array)
    assert can(name, "accounting") == (type(scheduler).usage is not Scheduler.usage)


def test_a_profile_names_only_a_registered_scheduler():
    with pytest.raises(ConfigError, match="Input should be 'slurm', 'local' or 'slurm-rest'"):
        validate(Profile, {**_profile(), "scheduler": "pbs"}, file="pbs.yaml")


PBS_SKETCH = '''
from hpclaunch.schedulers.base import JobStatus, Scheduler


class PbsScheduler(Scheduler):
    name = "pbs"

    def submit(self, script, run_dir, after=()):
        return "1.pbs-server"

    def status(self, job_ids):
        return {j: JobStatus(j, "PENDING", source="qstat") for j in job_ids}

    def cancel(self, job_id):
        pass
'''


def _profile() -> dict:
    return {"name": "pbs-cluster", "scheduler": "pbs", "accelerator": "cpu", "backend": "gloo",
            "default_partition": "workq", "partitions": {"workq": {"gpus_per_node": 4, "cpus_per_node": 8,
                                                                   "max_nodes": 16, "gres": None}}}


def test_a_new_backend_is_its_package_and_one_line_in_the_table(tmp_path, monkeypatch):
    (tmp_path / "pbs_sketch").mkdir()
    (tmp_path / "pbs_sketch" / "__init__.py").write_text(PBS_SKETCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pbs_sketch", raising=False)

    monkeypatch.setitem(backends.SCHEDULERS, "pbs", Backend("pbs_sketch:PbsScheduler",
                                                            frozenset({"multi_node", "time_limit", "arrays"})))

    pbs = get_scheduler("pbs")
    assert pbs.status(["1"])["1"].state == "PENDING" and pbs.template_dir == "schedulers/pbs"
    assert can("pbs", "arrays") and can("pbs", "multi_node") and not can("pbs", "srun")
    assert pbs.capabilities == {"multi_node", "time_limit", "arrays"} and not can("pbs", "exclude_nodes")
    profile = validate(Profile, _profile(), file="pbs.yaml")
    assert profile.scheduler == "pbs" and profile.partitions["workq"].max_nodes == 16
    with pytest.raises(ConfigError, match="pyxis is a Slurm plugin"):  # the capability, not the name, refuses it
        validate(Profile, {**_profile(), "container": {"runtime": "pyxis", "image": "/images/x.sqsh"}}, file="pbs.yaml")
