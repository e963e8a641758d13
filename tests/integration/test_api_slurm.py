"""The Python API and provenance on the dev Slurm cluster: `hpclaunch.submit` queues GPT-2 tiny through sbatch,
`wait` follows it to the end, `metrics` reads what it trained; the run's provenance.json carries the packages
and the Lmod modules of the job's own environment (the profile loads hpclaunch-dev/1.0)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

import hpclaunch

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHORT = {"train.max_steps": 4, "train.log_every": 1, "train.save_every": 0, "train.eval_steps": 1}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[hpclaunch.Job]:
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: the function-scoped monkeypatch cannot serve
        mp.setenv("HPCLAUNCH_HOME", str(tmp_path_factory.mktemp("hpclaunch-home")))
        yield hpclaunch.submit(REPO / "recipes" / "gpt2", profile="dev-slurm", preset="tiny", layout="1n2g",
                               overrides=SHORT)


def test_the_api_submits_waits_and_reads_metrics_of_a_slurm_job(job: hpclaunch.Job) -> None:
    assert job.job_id is not None and job.job_id.isdigit()  # a Slurm job id
    status = job.wait(timeout=400, poll=2)
    assert status.state == "COMPLETED", job.logs()
    rows = job.metrics()
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and all(r["world_size"] == 2 for r in rows)
    assert "[rank1]" in job.logs() and "done" in job.logs(rank=0)
    assert hpclaunch.job(job.job_id).status().state == "COMPLETED"


def test_provenance_has_the_packages_and_modules_of_the_jobs_environment(job: hpclaunch.Job) -> None:
    job.wait(timeout=400, poll=2)
    p = job.provenance()
    assert p["modules"]["system"] == "lmod" and "hpclaunch-dev/1.0" in p["modules"]["loaded"]
    assert p["packages"]["torch"] == metadata.version("torch")
    assert {"transformers", "click"} <= set(p["packages"])
    assert p["nodes"]["count"] == 1 and p["nodes"]["nodelist"].startswith("node")
    assert p["env"]["SLURM_JOB_ID"] == job.job_id and p["env"]["HPCLAUNCH_DEV_MODULE"]  # set by the module
    assert p["devices"]["tool"] is None  # fake GPUs: no vendor tool on the dev nodes
    assert p["recipe"]["source"] == str(REPO / "recipes" / "gpt2") and p["recipe"]["git"]["commit"]
