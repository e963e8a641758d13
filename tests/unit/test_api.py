"""The Python API (docs/python-api.md) on real jobs of the local profile: the documented example runs as
written; submit, wait, status, logs, metrics, cancel and hpclaunch.job(ID); errors are HpclaunchErrors; and the
CLI and the API see the same jobs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hpclaunch
from hpclaunch.errors import ConfigError, HpclaunchError, NotFoundError

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_the_documented_example_runs_end_to_end(hpc_home, capsys):
    example, functions = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[:3:2]
    scope: dict[str, object] = {}
    exec(compile(example, str(DOC), "exec"), scope)  # noqa: S102 - the doc's own example, as a user runs it
    out = capsys.readouterr().out.splitlines()
    job_id, run_dir = out[0].split()
    assert job_id.startswith("local-") and Path(run_dir).is_dir()
    step, loss = out[1].split()
    assert step == "10" and 0 < float(loss) < 10  # the last training step the job logged, and its loss
    assert out[2] == "[rank0] [gpt2] done"
    assert re.match(r"^\d+\.\d+", out[3])  # the job's torch version from provenance.json
    job = hpclaunch.job(job_id)  # the same job found again by its id
    assert job.run_dir == Path(run_dir) and job.status().state == "COMPLETED"
    frame = job.metrics(as_frame=True)
    assert list(frame["step"]) == [r["step"] for r in job.metrics()] and frame["loss"].iloc[-1] == float(loss)
    assert job.metrics(kind="eval")[-1]["step"] == 10
    exec(compile(functions, str(DOC), "exec"), scope)  # noqa: S102 - its "every command, as a function" example
    said = capsys.readouterr().out.splitlines()
    assert said[0] == "COMPLETED reached [gpt2] done", said
    avail = json.loads(said[1])
    assert avail["estimates"] == [{"profile": "local", "partition": "local", "layout": "1n2g", "start": "now",
                                   "cost_per_hour": None}], avail
    assert scope["planned"].to_json()["params"] > 0  # type: ignore[attr-defined]


def test_dry_run_cancel_and_errors(hpc_home):
    dry = hpclaunch.submit("allreduce", profile="local", overrides={"train.lr": 0.5}, dry_run=True)
    assert dry.job_id is None and "allreduce.py" in dry.script.read_text()
    assert "lr: 0.5" in (dry.run_dir / "resolved.yaml").read_text()
    with pytest.raises(HpclaunchError, match="dry run submitted nothing"):
        dry.status()

    slow = hpclaunch.submit("allreduce", profile="local", preset="slow")
    assert slow.status().state in ("PENDING", "RUNNING")
    with pytest.raises(hpclaunch.JobTimeout, match="still"):
        slow.wait(timeout=0.5, poll=0.1)
    assert slow.cancel().cancelled
    assert slow.wait(timeout=60, poll=0.2).state == "CANCELLED"
    again = slow.cancel()  # as `hpclaunch cancel`: an ended job is left alone and said to be so
    assert not again.cancelled and again.state == "CANCELLED"

    runs = sorted((hpc_home / "runs").iterdir())
    with pytest.raises(ConfigError, match="cannot wait for another"):  # --after: checked before anything is written
        hpclaunch.submit("allreduce", profile="local", after=["12345"], dry_run=True)
    with pytest.raises(ConfigError, match="--sbatch"):
        hpclaunch.submit("allreduce", profile="local", sbatch=["mem=64G"], dry_run=True)
    assert sorted((hpc_home / "runs").iterdir()) == runs

    with pytest.raises(ConfigError, match="--profile is required"):
        hpclaunch.submit("allreduce")
    with pytest.raises(ConfigError, match="train.lr"):
        hpclaunch.submit("allreduce", profile="local", overrides={"train.lr": "fast"})
    with pytest.raises(NotFoundError):
        hpclaunch.job("local-999")
    with pytest.raises(NotFoundError, match="metrics"):
        hpclaunch.job(slow.job_id or "").metrics()


def test_a_sweep_from_python_waits_for_every_element(hpc_home):
    sweep = hpclaunch.submit("failmodes", profile="local", preset="metrics", sweep={"train.lr": [0.1, 0.2]},
                             max_parallel=1)
    assert sweep.wait(timeout=120, poll=0.5).state == "COMPLETED"
    elements = hpclaunch.job(sweep.job_id or "").elements
    assert [e.job_id for e in elements] == [f"{sweep.job_id}_0", f"{sweep.job_id}_1"]
    assert all(e.status().state == "COMPLETED" and len(e.metrics()) == 20 for e in elements)


def test_the_cli_and_the_api_see_the_same_job(hpclaunch_cli):
    result = hpclaunch_cli("submit", "allreduce", "--profile", "local", "--follow", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout.splitlines()[0])
    job = hpclaunch.job(info["job_id"])
    assert str(job.run_dir) == info["run_dir"] and str(job.script) == info["script"]
    status = json.loads(hpclaunch_cli("status", info["job_id"], "--json").stdout)
    assert status["state"] == job.status().state == "COMPLETED"
    status.pop("schema")
    assert json.loads(json.dumps(job.describe())) == status  # one view for the API and the CLI
    assert "world_size=2" in job.logs(rank=1) and "[rank1]" in job.logs()
    assert hpclaunch_cli("cancel", "local-999").exit_code == 2  # an unknown job: a clear error from the API


def test_import_hpclaunch_stays_light(hpc_home):
    probe = ("import json, sys, hpclaunch\nhpclaunch.__version__\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                           check=True).stdout))
    assert not loaded & {"torch", "pydantic", "jinja2", "yaml", "pandas", "click"}, sorted(loaded)
    assert callable(hpclaunch.submit) and callable(hpclaunch.job)


def test_the_api_functions_are_not_shadowed_by_the_packages():
    """`hpclaunch.submit` and `hpclaunch.job` stay the API's functions after every stage package is imported (a
    package named `submit` would replace the function with itself as soon as anything imported it)."""
    probe = ("import hpclaunch, importlib\n"
             "for m in ('submission.submit', 'submission.sweep', 'jobs.state', 'jobs.cancel', 'api'):\n"
             "    importlib.import_module('hpclaunch.' + m)\n"
             "from hpclaunch import api\n"
             "print(hpclaunch.submit is api.submit, hpclaunch.job is api.job)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


@pytest.fixture
def hpclaunch_cli(hpclaunch):  # the conftest's CLI runner, renamed: `hpclaunch` is the package here
    return hpclaunch
