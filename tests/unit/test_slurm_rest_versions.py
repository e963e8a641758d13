"""The OpenAPI version hpclaunch speaks with a slurmrestd, negotiated from what real slurmrestds said they serve
(`GET /openapi/v3`, recorded on this machine: tests/fixtures/slurmrestd/openapi/, README.md there: Slurm 22.05 as the
dev cluster runs it and with every plugin, 24.11, 26.05), and the typed job description of v0.0.40-v0.0.45 checked
against the job_desc_msg schema those slurmrestds publish (jobdesc-fields.json there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch.errors import CommandError, ConfigError
from hpclaunch.schedulers.slurm_rest import jobdesc, typed, versions
from hpclaunch.schedulers.slurm_rest.scheduler import SlurmRestScheduler
from hpclaunch.submission.render import render
from hpclaunch.submission.resolve import CliOverrides, resolve
from hpclaunch.submission.rundir import with_recipe_copy
from tests.unit.test_slurm_rest import RUN_DIR, _Replay, replay, route  # noqa: F401

OPENAPI = Path(__file__).resolve().parents[1] / "fixtures" / "slurmrestd" / "openapi"
TYPED = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")


def spec(name: str) -> dict:
    return json.loads((OPENAPI / f"{name}.json").read_text())


@pytest.mark.parametrize("name, slurm, slurmdb, served, release", [
    ("slurmrestd-22.05-dev", "v0.0.38", "v0.0.38", "v0.0.38", None),  # the dev cluster's: -s openapi/v0.0.38,dbv0.0.38
    ("slurmrestd-22.05-all", "v0.0.38", "v0.0.38", "v0.0.36-v0.0.38", None),
    ("slurmrestd-24.11", "v0.0.42", "v0.0.42", "v0.0.40-v0.0.42", "24.11.5"),
    ("slurmrestd-26.05", "v0.0.45", "v0.0.45", "v0.0.42-v0.0.45", "26.05.5"),
])
def test_the_newest_version_both_speak_is_chosen(name, slurm, slurmdb, served, release):
    api = versions.choose(spec(name))
    assert (api.slurm, api.slurmdb, versions.span(api.served), api.release) == (slurm, slurmdb, served, release)
    assert api.ctld("job/submit") == f"/slurm/{slurm}/job/submit" and api.typed == (slurm != "v0.0.38")


def test_no_shared_version_is_said_in_words_never_a_bare_404():
    # 22.05 without its v0.0.38 plugins (slurmrestd -s openapi/v0.0.36,openapi/v0.0.37,...): the recording, less them
    old = spec("slurmrestd-22.05-all")
    old["paths"] = {p: m for p, m in old["paths"].items() if "v0.0.38" not in p}
    with pytest.raises(CommandError) as exc:
        versions.choose(old, "http://login:6820")
    assert exc.value.message == ("the slurmrestd at http://login:6820 speaks v0.0.36-v0.0.37; hpclaunch speaks "
                                 "v0.0.38, v0.0.40-v0.0.45")
    assert exc.value.hint and "slurmrestd's -s option" in exc.value.hint
    # slurmctld's paths without slurmdbd's: no accounting through it, the rest works
    ctld_only = spec("slurmrestd-26.05")
    ctld_only["paths"] = {p: m for p, m in ctld_only["paths"].items() if not p.startswith("/slurmdb/")}
    api = versions.choose(ctld_only)
    assert (api.slurm, api.slurmdb, api.db("job/1")) == ("v0.0.45", None, None)


def test_span_joins_runs_and_splits_at_gaps():
    assert versions.span(versions.OURS) == "v0.0.38, v0.0.40-v0.0.45"
    assert versions.span(["v0.0.37", "v0.0.36", "v0.0.38"]) == "v0.0.36-v0.0.38"
    assert versions.span([]) == "none"


def test_the_version_is_asked_once_per_slurmrestd_and_process(replay):  # noqa: F811
    route(replay, "job-running", release="26.05")
    job = json.loads(json.dumps(replay[("GET", "/openapi/v3")]))  # the route is there
    assert job["status"] == 200
    path = next(p for (m, p) in replay if p.startswith("/slurm/"))
    job_id = path.rsplit("/", 1)[-1]
    for _ in range(3):
        assert SlurmRestScheduler().status([job_id])[job_id].state == "RUNNING"
    assert [p for _, p, _ in _Replay.seen].count("/openapi/v3") == 1
    assert [p for _, p, _ in _Replay.seen].count(path) == 3


# --- the typed job description (v0.0.40 on) ---------------------------------------------------------------------

FIELDS = json.loads((OPENAPI / "jobdesc-fields.json").read_text())
_JSON = {str: "string", int: "integer", bool: "boolean", list: "array", dict: "object"}

# every option typed.py writes, once (values as a profile's sbatch_extra or --sbatch would give them)
EVERY = ["--account=a", "--acctg-freq=task=30", "--array=0-3%2", "--batch=f", "--begin=1795900000", "--bb=x",
         "--chdir=/w", "--cluster-constraint=c", "--comment=hi", "--constraint=ib", "--container=/c",
         "--contiguous", "--core-spec=1", "--cpu-freq=high", "--cpus-per-task=2", "--deadline=1795999999",
         "--dependency=afterok:1", "--distribution=block", "--error=e", "--exclude=n[1,3],m2", "--hold",
         "--input=i", "--job-name=j", "--licenses=l", "--mail-type=END,TIME_LIMIT_90", "--mail-user=u",
         "--mcs-label=m", "--mem=4G", "--mem-per-cpu=512", "--mincpus=2", "--network=n", "--nice=5", "--no-kill",
         "--no-requeue", "--nodelist=n1", "--nodes=2", "--ntasks=4", "--ntasks-per-core=1", "--ntasks-per-gpu=1",
         "--ntasks-per-node=2", "--ntasks-per-socket=1", "--open-mode=append", "--output=o", "--overcommit",
         "--partition=p", "--prefer=x", "--priority=10", "--profile=task", "--qos=q", "--reboot", "--requeue",
         "--reservation=r", "--sockets-per-node=1", "--thread-spec=1", "--threads-per-core=1", "--time=00:20:30",
         "--time-min=10", "--tmp=1G", "--wckey=w", "--gres=gpu:2", "--gpus-per-node=1", "--gpus=2",
         "--gpus-per-socket=1", "--gpus-per-task=1", "--cpus-per-gpu=2", "--mem-per-gpu=1G", "--gpu-bind=closest",
         "--signal=RB:USR1@90", "--exclusive", "--kill-on-invalid-dep=yes", "--spread-job", "--use-min-nodes",
         "--get-user-env", "--wait-all-nodes=1", "--export=ALL,B=2"]


@pytest.mark.parametrize("version", TYPED)
def test_every_field_written_is_in_the_published_schema_with_its_type(version):
    options = [o for o in EVERY if version not in typed.MISSING.get(jobdesc.split(o)[0], ())]
    job = jobdesc.describe(options, {"PATH": "/bin"}, "/runs/x", {"A": "1"}, version)
    schema = FIELDS[version]
    wrong = {k: (type(v).__name__, schema.get(k)) for k, v in job.items() if schema.get(k) != _JSON[type(v)]}
    assert not wrong, f"{version} ({schema['source']}): {wrong}"
    assert len(job) >= 60


def test_the_fields_have_sbatchs_meaning():
    job = jobdesc.describe(EVERY, {"PATH": "/bin"}, "/runs/x", {"A": "1"}, "v0.0.45")
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 21}  # 20:30 rounded up, as sbatch
    assert job["time_minimum"]["number"] == 10 and job["memory_per_node"]["number"] == 4096
    assert job["memory_per_cpu"]["number"] == 512 and job["temporary_disk_per_node"] == 1024
    assert job["tres_per_node"] == "gres/gpu:1,gres/gpu:2"  # --gpus-per-node first, then --gres (slurm_opt.c)
    assert (job["tres_per_job"], job["tres_per_task"], job["cpus_per_tres"], job["memory_per_tres"],
            job["tres_bind"]) == ("gres/gpu:2", "gres/gpu:1", "gres/gpu:2", "gres/gpu:1024", "gres/gpu:closest")
    assert job["excluded_nodes"] == ["n[1,3]", "m2"] and job["required_nodes"] == ["n1"]
    assert job["open_mode"] == ["APPEND"] and job["mail_type"] == ["END", "TIME=90%"]
    assert (job["kill_warning_signal"], job["kill_warning_delay"]["number"], job["kill_warning_flags"]) == (
        "USR1", 90, ["BATCH_JOB", "RESERVATION_JOB"])
    assert job["shared"] == ["none"] and "exclusive" not in job
    assert job["flags"] == ["KILL_INVALID_DEPENDENCY", "SPREAD_JOB", "PREFER_MINIMUM_NODE_COUNT"]
    assert job["requeue"] is True and job["hold"] is True and job["kill_on_node_fail"] is False  # --requeue last
    assert job["begin_time"] == {"set": True, "infinite": False, "number": 1795900000}
    assert job["environment"][:1] == ["PATH=/bin"] and "SLURM_GET_USER_ENV=1" in job["environment"]
    assert "A=1" in job["environment"] and "B=2" in job["environment"]
    assert job["current_working_directory"] == "/w"  # --chdir wins over the run directory
    old = jobdesc.describe(["--exclusive", "--oversubscribe", "--time=UNLIMITED"], {}, "/x", {}, "v0.0.40")
    assert old["exclusive"] == ["true"] and old["oversubscribe"] is True
    assert old["time_limit"] == {"set": False, "infinite": True, "number": 0}


def test_the_golden_job_script_in_v0045(hpc_home):
    spec_ = resolve("gpt2", "dev-slurm-rest", CliOverrides(preset="tiny", layout="2n1g"))
    script = render(with_recipe_copy(spec_, RUN_DIR), RUN_DIR).script
    job = jobdesc.describe(["--get-user-env", *jobdesc.script_options(script), "--dependency=afterok:5"],
                           {"PATH": "/usr/bin:/bin"}, "/runs/golden", {}, "v0.0.45")
    assert job == {
        "cpus_per_task": 1, "tres_per_node": "gres/gpu:1", "name": "gpt2", "nodes": "2", "tasks_per_node": 1,
        "memory_per_node": {"set": True, "infinite": False, "number": 1024}, "open_mode": ["APPEND"],
        "standard_output": "/runs/golden/logs/job.%j.out", "partition": "debug", "requeue": True,
        "time_limit": {"set": True, "infinite": False, "number": 20}, "dependency": "afterok:5",
        "environment": ["PATH=/usr/bin:/bin", "SLURM_GET_USER_ENV=1"], "current_working_directory": "/runs/golden"}


def test_an_option_the_version_spoken_has_no_field_for_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"--cores-per-socket has no field .* \(OpenAPI v0\.0\.42\)"):
        jobdesc.describe(["--cores-per-socket=4"], {}, "/x", {}, "v0.0.42")
    assert jobdesc.describe(["--cores-per-socket=4"], {}, "/x", {}, "v0.0.45")["cores_per_socket"] == 4
    with pytest.raises(ConfigError, match="a UNIX time"):
        jobdesc.describe(["--begin=now+1hour"], {}, "/x", {}, "v0.0.45")
    with pytest.raises(ConfigError, match="--mem=lots is not a memory size"):
        jobdesc.describe(["--mem=lots"], {}, "/x", {}, "v0.0.45")
